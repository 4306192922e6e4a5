"""The benchmarks render their Markdown sections from saved measurements (`--from-json`), and
benchmarks/README.md's CUDA sections are exactly those renderings of the files in
benchmarks/results/ (no table typed by hand). Rendering measures nothing: it runs anywhere."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from minattn.course import REPO_ROOT
from minattn.course.bench import load_json, measured_on

RESULTS = REPO_ROOT / "benchmarks" / "results" / "h100-2026-11-26"
H100 = "NVIDIA H100 80GB HBM3, torch 2.11.0+cu130 (CUDA 13.0), 2026-11-26"
BENCHMARKS = ["attention", "sparse", "multiscale", "xl", "ibm1", "task_heads"]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}",
                                                  REPO_ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _section(name: str) -> str:
    readme = (REPO_ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    begin, end = f"<!-- BEGIN {name} -->\n", f"\n<!-- END {name} -->"
    assert begin in readme and end in readme, f"no {name} section in benchmarks/README.md"
    return readme[readme.index(begin) + len(begin):readme.index(end)]


@pytest.mark.parametrize("name, file, section", [
    ("sparse", "sparse_bf16.json", "sparse-cuda-bfloat16"),
    ("multiscale", "multiscale.json", "multiscale-cuda-float32"),
    ("xl", "xl.json", "xl-cuda"),
])
def test_the_cuda_sections_are_rendered_from_the_saved_measurements(name, file, section):
    """Each section names the device, torch and date of its file, shows its numbers, and is
    what `--from-json` renders now (re-render after a change: the command is in the README)."""
    got, text = _script(name).render(load_json(RESULTS / file), RESULTS / file)
    assert got == section
    assert H100 in text and f"rendered from `benchmarks/results/h100-2026-11-26/{file}`" in text
    assert _section(section) == text.strip()


def test_a_section_carries_numbers_of_its_file():
    payload = load_json(RESULTS / "sparse_bf16.json")
    _, text = _script("sparse").render(payload, RESULTS / "sparse_bf16.json")
    row = next(r for r in payload["results"] if r["n"] == 4096)
    assert f"| {row['fwd_bwd_s']['dense'] * 1e3:.2f} ms |" in text  # 0.66 ms, dense at 4k
    assert "| dispatched / dense = 3.00 | no |" in text  # the goal it missed then
    assert "Routes changed since this run (`flex.FLEX_FROM`): 4,096 now dense." in text


def test_the_date_comes_from_the_file_or_its_folder(tmp_path):
    """Files saved before the date was recorded take it from their folder's name."""
    assert load_json(RESULTS / "xl.json")["machine"]["date"] == "2026-11-26"
    plain = tmp_path / "xl.json"
    plain.write_text((RESULTS / "xl.json").read_text())
    assert load_json(plain)["machine"]["date"] is None
    assert measured_on(load_json(plain)["machine"]).endswith("date not recorded")


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_benchmark_takes_from_json(name, monkeypatch):
    """Every benchmark measures through `measure_all` and renders through `render`, which
    --from-json calls alone: given a file that is not there, it measures nothing and fails."""
    script = _script(name)
    assert callable(script.measure_all) and callable(script.render)
    monkeypatch.setattr(script, "measure_all", lambda args: pytest.fail("it measured"))
    monkeypatch.setattr(sys, "argv", [f"{name}.py", "--from-json", "no/such/run.json"])
    with pytest.raises(FileNotFoundError, match="no/such/run.json"):
        script.main()
