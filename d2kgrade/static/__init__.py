"""Static design-property analysis: facts from Triton/Python (``ast``) and CUDA C++ (tree-sitter), named checks.

::

    from d2kgrade.static import extract_facts, grade_file
    facts = extract_facts(path_or_source)      # Facts; .errors says why a file could not be analysed
    fg = grade_file(rubric, path)              # d2kgrade.grades.FileGrade, rater="static"

Never imports or runs the analysed code, and never imports torch or triton.
"""

from d2kgrade.static.extract import clear_cache, extract_facts
from d2kgrade.static.facts import Facts
from d2kgrade.static.grade import check_rubric_static, grade_facts, grade_file, grade_property
from d2kgrade.static.registry import CheckResult, Span, check, known_checks

__all__ = ["CheckResult", "Facts", "Span", "check", "check_rubric_static", "clear_cache", "extract_facts",
           "grade_facts", "grade_file", "grade_property", "known_checks"]
