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


H200 = "NVIDIA H200, torch 2.11.0+cu130 (CUDA 13.0), 2026-11-30"


@pytest.mark.parametrize("name, file, section, machine", [
    ("sparse", "h200-2026-11-30/sparse_bf16.json", "sparse-cuda-bfloat16", H200),
    ("sparse", "h200-2026-11-30/sparse_fp32.json", "sparse-cuda-float32", H200),
    ("multiscale", "h200-2026-11-30/multiscale_fp32.json", "multiscale-cuda-float32", H200),
    ("multiscale", "h200-2026-11-30/multiscale_bf16.json", "multiscale-cuda-bfloat16", H200),
    ("xl", "h100-2026-11-26/xl.json", "xl-cuda", H100),
])
def test_the_cuda_sections_are_rendered_from_the_saved_measurements(name, file, section,
                                                                     machine):
    """Each section names the device, torch and date of its file, shows its numbers, and is
    what `--from-json` renders now (re-render after a change: the command is in the README)."""
    path = RESULTS.parent / file
    got, text = _script(name).render(load_json(path), path)
    assert got == section
    assert machine in text and f"rendered from `benchmarks/results/{file}`" in text
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


def test_the_sparse_benchmarks_flex_contender_returns_its_inputs_shape(monkeypatch):
    """The user's FlexAttention runs on (B·H, 1, N, d) and must come back as (B, H, N, d):
    a (H, 1) against (1, H) difference broadcasts without an error, and its backward fails on
    CUDA. The readable window kernel stands in for FlexAttention (the same numbers; an eager
    flex call costs seconds of CPU), called on FlexAttention's shapes."""
    import torch

    script = _script("sparse")
    seen = []

    def stand_in(q, k, v, block_mask):
        seen.append(tuple(q.shape))
        return script.window_attention_fast_torch(q, k, v, 4)

    monkeypatch.setattr(script, "_users_flex", lambda: stand_in)
    q, k, v = torch.randn(3, 2, 3, 64, 8).unbind(0)  # B = 2, H = 3
    out = script.flex_window(64, 4, torch.device("cpu"))(q, k, v)
    assert seen == [(6, 1, 64, 8)]
    assert out.shape == (2, 3, 64, 8)
    torch.testing.assert_close(out, script.window_attention_fast_torch(q, k, v, 4))


def test_contenders_timed_against_each_other_are_checked_to_compute_the_same():
    """`max_differences`: each contender's largest difference from the reference's forward;
    an output of another shape is refused rather than broadcast."""
    import torch

    from minattn.course.bench import max_differences

    q, k, v = torch.randn(3, 1, 2, 5, 4).unbind(0)
    fns = {"ref": lambda q, k, v: v * 1, "same": lambda q, k, v: v + 0,
           "off": lambda q, k, v: v + 0.5}
    assert max_differences(fns, "ref", q, k, v) == {"same": 0.0, "off": pytest.approx(0.5)}
    fns["(2, 1)"] = lambda q, k, v: v.reshape(2, 1, 5, 4)
    with pytest.raises(RuntimeError, match=r"\{'\(2, 1\)': \(2, 1, 5, 4\)\}, not \(1, 2, 5, 4\)"):
        max_differences(fns, "ref", q, k, v)


def test_the_multiscale_benchmark_compares_its_contenders_with_the_masked_definition():
    import torch

    r = _script("multiscale").measure(64, 1, torch.device("cpu"), torch.float32)
    assert r["max_diff_vs"] == "masked" and set(r["max_diff"]) == {"multiscale", "grouped"}
    assert max(r["max_diff"].values()) < 1e-5, r["max_diff"]
