"""The classroom: exercises, student copies, the student's check, grading, the audit.

No lesson and no mechanism imports this package (a lesson loads only
minattn/course/checkout.py); the teacher and the students run it as
`python -m minattn.course.classroom COMMAND` (cli.py). Read it top down; each file imports only
the ones above it:

    regions    the exercise markers: finding them, stripping a solution, splicing one back
    copies     student copies (tracked files, solutions removed, a manifest; safe rebuilds)
    check      the student's check: the copy's exercise tests, one line per exercise
    stubs      the functions holding an exercise: stubbed in a process, or found for routing
    audit      nothing in a student copy gives an answer away
    sandbox    bubblewrap: where a submission's code runs
    protocol   the wire between the teacher's tests and a submission's worker: messages, values
    client     the teacher's end: starts the worker, sends it the graded functions' calls
    worker     the submission's end, in the sandbox: runs the calls
    plugin     the pytest plugin that routes graded functions to a worker (the threat model)
    grading    the gradebook: each submission's regions against the teacher's tests
    cli        the command line
"""

# (`audit` and `check` are not re-exported: they would hide the modules of the same name.)
from .audit import find_giveaways
from .copies import make_student_copy, source_files
from .grading import grade
from .regions import Exercise, all_exercises, by_id, find_exercises, splice, strip_solutions
from .stubs import stub_in_process

__all__ = ["Exercise", "all_exercises", "by_id", "find_exercises", "find_giveaways", "grade",
           "make_student_copy", "source_files", "splice", "stub_in_process", "strip_solutions"]
