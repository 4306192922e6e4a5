"""Exercise regions: the markers in the library, a solution stripped, a solution spliced back.

A solution in the library is a region of code between two comment lines,

    # BEGIN EXERCISE 1.1 implement: numerically stable (masked) softmax (~15 min)
    ...the teacher's solution...
    # END EXERCISE

kind is `implement`, `predict` or `experiment` (a missing kind means implement); the time is
optional. One id may mark several regions: every place that would give the answer away (the
torch twin, a fast path, a helper) carries the same id, so that stripping leaves nothing to copy.

`strip_solutions` makes a student's file (each region's body a NotImplementedError naming the
exercise); `splice` puts a student's region bodies back into the teacher's file (grading, and
a rebuilt student copy that keeps the student's work).

A lesson that writes an exercise's lines in the cell that explains them marks them as *shown*,
with the one statement that stands in for them where the exercise is handed out:

    # BEGIN EXERCISE 1.2 shown: out, weights = attention_np(q, k, v)
    scores = q @ k.T / np.sqrt(q.shape[-1])
    ...
    # END EXERCISE

`strip_shown` makes the student's lesson: the lines gone, the library's function (the
student's own code, once written) in their place. Shown regions live in lessons only; they are
not exercises of their own (no test reaches them, the grader never reads them).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

from .. import REPO_ROOT

KINDS = ("implement", "predict", "experiment")
BEGIN = re.compile(r"^(?P<indent>[ \t]*)# BEGIN EXERCISE (?P<id>\S+)"
                   r"(?:\s+(?P<kind>implement|predict|experiment)\s*:)?\s*(?P<what>.*?)\s*$")
END = re.compile(r"^[ \t]*# END EXERCISE\s*$")
MINUTES = re.compile(r"\s*\(\s*~?\s*(?P<n>\d+)\s*min(?:utes)?\s*\)\s*$")
# The folder of minattn/ that holds no exercise: the classroom (whose docstrings show markers).
PLUMBING = ("course", "classroom")


def in_plumbing(rel: Path) -> bool:
    """True for a path (relative to minattn/) inside the classroom."""
    return tuple(Path(rel).parts[:len(PLUMBING)]) == PLUMBING
LINE_LENGTH = 100  # pyproject.toml's [tool.ruff] line-length: a stub wraps to it


# ============================================================================ markers
@dataclass(frozen=True)
class Exercise:
    """One marked region. Several regions may share an id (an exercise and its twins)."""
    id: str
    what: str
    path: Path
    line: int             # the BEGIN line (1-based)
    kind: str = "implement"
    minutes: int | None = None
    end: int = 0          # the END line (1-based)


def id_key(ex_id: str):
    """Sort key: 1.2 < 1.10 < 2.1."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[.]", ex_id)]


SHOWN = re.compile(r"^(?P<indent>[ \t]*)# BEGIN EXERCISE (?P<id>\S+) shown\s*:\s*(?P<code>.+?)\s*$")


# A lesson cell whose output answers an exercise (an experiment's table) says so on a line of
# its own; the class's pages leave that cell's output out (pages.class_notebook).
ANSWERED = re.compile(r"^[ \t]*# EXERCISE (?P<id>\S+) answered here\b", re.M)


def strip_shown(text: str, only: set[str] | None = None) -> str:
    """A lesson with the shown regions of the exercises in `only` (all when None) replaced by
    the statement their BEGIN line gives (see the module's docstring)."""
    out, inside = [], None
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if inside is None and (m := SHOWN.match(line)):
            if only is None or m["id"] in only:
                inside = m
                out += [f"{m['indent']}# Exercise {m['id']}: these lines are yours to write in "
                        "the library;\n",
                        f"{m['indent']}# your function stands in for them here.\n",
                        f"{m['indent']}{m['code']}\n"]
                continue
        if inside is not None:
            if END.match(line):
                inside = None
            continue
        out.append(line)
    if inside is not None:
        raise ValueError(f"exercise {inside['id']}: a shown region is never closed")
    return "".join(out)


def parse_begin(m: re.Match) -> tuple[str, str, int | None]:
    what, minutes = m["what"], None
    if t := MINUTES.search(what):
        what, minutes = what[:t.start()].rstrip(), int(t["n"])
    return m["kind"] or "implement", what, minutes


def find_exercises(text: str, path: Path = Path("?")) -> list[Exercise]:
    """Every marked region of a source text; checks that markers pair up."""
    found, open_at = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        if m := BEGIN.match(line):
            if open_at is not None:
                raise ValueError(f"{path}:{number}: BEGIN EXERCISE inside exercise "
                                 f"{open_at[0]['id']} (opened at line {open_at[1]})")
            open_at = (m, number)
        elif END.match(line):
            if open_at is None:
                raise ValueError(f"{path}:{number}: END EXERCISE without a BEGIN")
            m, begin = open_at
            kind, what, minutes = parse_begin(m)
            found.append(Exercise(m["id"], what, path, begin, kind, minutes, number))
            open_at = None
    if open_at is not None:
        raise ValueError(f"{path}:{open_at[1]}: exercise {open_at[0]['id']} is never closed")
    return found


_FOUND: dict[tuple[str, str], list[Exercise]] = {}  # (path, text) -> its regions


def all_exercises(root: Path = REPO_ROOT) -> list[Exercise]:
    """Every region in root/minattn (outside PLUMBING), in file order. (Each file is read every
    time; its regions are found once per text: a test run asks for them once per test.)"""
    exercises = []
    library = Path(root) / "minattn"
    for path in sorted(library.rglob("*.py")):
        if "__pycache__" not in path.parts and not in_plumbing(path.relative_to(library)):
            rel, text = path.relative_to(root), path.read_text()
            if (str(rel), text) not in _FOUND:
                _FOUND[str(rel), text] = find_exercises(text, rel)
            exercises += _FOUND[str(rel), text]
    return exercises


def by_id(exercises: list[Exercise]) -> dict[str, list[Exercise]]:
    """Regions grouped by exercise id, ids in course order."""
    groups: dict[str, list[Exercise]] = {}
    for e in exercises:
        groups.setdefault(e.id, []).append(e)
    return {k: groups[k] for k in sorted(groups, key=id_key)}


def summary(regions: list[Exercise]) -> Exercise:
    """The region that describes an exercise: the first with a description (twins may omit it)."""
    return next((r for r in regions if r.what), regions[0])


def descriptions(exercises: list[Exercise]) -> dict[str, str]:
    return {k: summary(v).what for k, v in by_id(exercises).items()}


def stub_message(ex_id: str, what: str) -> str:
    return f"Exercise {ex_id}: {what or 'see the docstring'}"


def stub_lines(indent: str, message: str, width: int | None = LINE_LENGTH) -> list[str]:
    """`raise NotImplementedError("<message>")` at `indent`, wrapped to `width` characters (the
    project's line length: a student copy passes `ruff check`); one line when `width` is None."""
    one = f"{indent}raise NotImplementedError({json.dumps(message, ensure_ascii=False)})\n"
    if width is None or len(one) <= width + 1:
        return [one]
    inner, words, pieces = indent + "    ", message.split(" "), [""]
    room = width - len(inner) - 3  # the quotes, and the closing parenthesis
    for word in words:
        joined = f"{pieces[-1]} {word}" if pieces[-1] else word
        if pieces[-1] and len(json.dumps(joined, ensure_ascii=False)) > room:
            pieces[-1] += " "
            pieces.append(word)
        else:
            pieces[-1] = joined
    body = [f"{inner}{json.dumps(p, ensure_ascii=False)}\n" for p in pieces]
    body[-1] = body[-1][:-1] + ")\n"
    return [f"{indent}raise NotImplementedError(\n", *body]


def strip_solutions(text: str, only: set[str] | None = None,
                    what: dict[str, str] | None = None, keep_lines: bool = False) -> str:
    """Replace each marked region's body with a NotImplementedError naming the exercise
    (only the exercises whose ids are in `only`, when given). `what` describes exercises whose
    twin regions carry no description of their own. `keep_lines` keeps every line's number
    (the stub on one line, padded with blank lines: for code compiled in a process, whose
    imports are left as they are); otherwise a long stub is wrapped to the project's line
    length."""
    what = dict(what or {})
    regions = find_exercises(text)
    for e in regions:  # a twin without a description borrows its exercise's
        if e.what:
            what.setdefault(e.id, e.what)
    ends = {e.line: e.end for e in regions}
    tree = None
    out, inside, dropped = [], False, 0
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if (m := BEGIN.match(line)) and (only is None or m["id"] in only):
            inside, dropped = True, 0
            message = stub_message(m["id"], what.get(m["id"]) or parse_begin(m)[1])
            out.append(line)
            if not keep_lines:
                tree = tree or ast.parse(text)
                if names := needed_after(tree, number, ends[number]):
                    them = "them" if len(names) > 1 else "it"
                    out += [f"{m['indent']}# your code sets {', '.join(names)} (the lines after "
                            f"the exercise read {them}):\n",
                            f"{m['indent']}{' = '.join(names)} = None\n"]
            out += stub_lines(m["indent"], message, None if keep_lines else LINE_LENGTH)
        elif END.match(line) and inside:
            inside = False
            out += ["\n"] * (dropped - 1 if keep_lines and dropped else 0) + [line]
        elif not inside:
            out.append(line)
        else:
            dropped += 1
    if keep_lines:  # compiled in a process, never linted: no import to mark
        return "".join(out)
    return mark_imports_left_unused(text, "".join(out))


def _loaded_names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        e.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
        for t in n.targets if isinstance(t, ast.Name) and t.id == "__all__"
        for e in getattr(n.value, "elts", []) if isinstance(e, ast.Constant)}


def mark_imports_left_unused(before: str, after: str) -> str:
    """An import only a stripped region used (lesson 05's softmax, imported for the attention
    step) would fail the copy's `ruff check` (F401): its line says the exercise needs it."""
    try:
        old, new = ast.parse(before), ast.parse(after)
    except SyntaxError:
        return after
    used_before, used_after = _loaded_names(old), _loaded_names(new)
    lines = after.splitlines(keepends=True)
    for node in ast.walk(new):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        for alias in node.names:
            name = (alias.asname or alias.name).split(".")[0]
            if name in used_before and name not in used_after and alias.lineno <= len(lines):
                line = lines[alias.lineno - 1]
                if "noqa" not in line:
                    body = line.rstrip("\r\n")
                    lines[alias.lineno - 1] = (f"{body}  # noqa: F401 -- for an exercise"
                                               f"{line[len(body):]}")
    return "".join(lines)


def needed_after(tree: ast.AST, begin: int, end: int) -> list[str]:
    """The names a region (lines begin..end) assigns that the lines after it, in its function,
    read before assigning them: a stub must give them a value, or the copy fails `ruff check`
    (F821) even where no line after the stub ever runs."""
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef,
                 ast.AsyncFunctionDef)) and n.lineno < begin and end <= n.end_lineno]
    if not functions:
        return []
    function = max(functions, key=lambda n: n.lineno)  # the innermost one
    before, inside, after = set(), set(), {}
    for a in (function.args.posonlyargs + function.args.args + function.args.kwonlyargs
              + [function.args.vararg, function.args.kwarg]):
        if a is not None:
            before.add(a.arg)
    for node in ast.walk(function):
        if not isinstance(node, ast.Name) or node.lineno == function.lineno:
            continue
        store = isinstance(node.ctx, ast.Store)
        if node.lineno < begin and store:
            before.add(node.id)
        elif begin < node.lineno < end and store:
            inside.add(node.id)
        elif node.lineno > end:
            after.setdefault(node.id, []).append(((node.lineno, node.col_offset), store))
    needed = {}
    for name in inside - before:
        uses = after.get(name, [])
        first = min(uses, default=None)
        if any(at[0] == first[0][0] and not store for at, store in uses):  # read before set
            needed[name] = first[0]
    return sorted(needed, key=needed.get)  # in the order the lines after read them


def expand_ids(requested, known) -> list[str]:
    """Check exercise ids before anything touches the disk: '1' means every exercise of lesson 1.
    Raises ValueError listing the valid ids."""
    known = sorted(set(known), key=id_key)
    chosen = []
    for item in requested:
        item = str(item).strip()
        lesson = item.lstrip("0") if item.isdigit() else None
        matches = ([k for k in known if k.split(".")[0] == lesson] if lesson is not None
                   else [k for k in known if k == item])
        if not matches:
            lessons = sorted({k.split('.')[0] for k in known}, key=id_key)
            raise ValueError(f"unknown exercise {item!r}; valid ids: {' '.join(known)} "
                             f"(or a lesson number: {' '.join(lessons)})")
        chosen += [m for m in matches if m not in chosen]
    return sorted(chosen, key=id_key)


def lesson_of(ex_id: str, root: Path = REPO_ROOT) -> str:
    """The lesson file stem an exercise belongs to ('01_attention'), from its first number."""
    number = ex_id.split(".")[0]
    if number.isdigit():
        for path in sorted((Path(root) / "lessons").glob(f"{int(number):02d}_*.py")):
            return path.stem
    return f"lesson {number}"


# ============================================================================ splicing
def find_region(lines: list[str], ex_id: str, k: int, rel: str) -> tuple[int, int] | str:
    """(BEGIN index, END index) of the k-th region of `ex_id` in a submission's lines (0-based),
    or what is wrong with its markers. Lenient: other regions' markers may be broken."""
    begins = [i for i, line in enumerate(lines) if (m := BEGIN.match(line)) and m["id"] == ex_id]
    if not begins:
        return f"exercise {ex_id}: BEGIN marker missing in {rel}"
    if k >= len(begins):
        return (f"exercise {ex_id}: BEGIN marker of its region #{k + 1} missing in {rel} "
                f"(found {len(begins)})")
    b = begins[k]
    for i in range(b + 1, len(lines)):
        if END.match(lines[i]):
            return b, i
        if m := BEGIN.match(lines[i]):
            return (f"exercise {ex_id}: END marker missing in {rel} (BEGIN at line {b + 1}; the "
                    f"next marker is exercise {m['id']}'s BEGIN at line {i + 1})")
    return f"exercise {ex_id}: END marker missing in {rel} (BEGIN at line {b + 1})"


def splice(teacher_text: str, submission_text: str | None, ids: set[str], what: dict[str, str],
           rel: str = "?") -> tuple[str, dict[str, list[str]]]:
    """The teacher's file with the bodies of the `ids` regions taken from the submission's file
    (matched by id and order). A region the submission lacks, or whose markers are broken,
    becomes a NotImplementedError stub. Returns (text, {exercise id: [what went wrong]})."""
    notes: dict[str, list[str]] = {}
    lines = teacher_text.splitlines(keepends=True)
    theirs = submission_text.splitlines(keepends=True) if submission_text is not None else None
    seen: dict[str, int] = {}
    replacements = []
    for e in find_exercises(teacher_text):
        if e.id not in ids:
            continue
        k = seen[e.id] = seen.get(e.id, -1) + 1
        found = (f"exercise {e.id}: {rel} missing in the submission" if theirs is None
                 else find_region(theirs, e.id, k, rel))
        if isinstance(found, tuple):
            body = theirs[found[0] + 1:found[1]]
        else:
            indent = BEGIN.match(lines[e.line - 1])["indent"]
            body = stub_lines(indent, stub_message(e.id, what.get(e.id, "")))
            if found not in notes.get(e.id, []):
                notes.setdefault(e.id, []).append(found)
        replacements.append((e.line - 1, e.end - 1, body))
    for b, en, body in reversed(replacements):
        lines[b + 1:en] = body
    return "".join(lines), notes
