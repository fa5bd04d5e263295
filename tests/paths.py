"""Where the test data lives: problem files in `problems/` (one home for examples' siblings, tests and
benchmarks), candidates in `tests/corpus/` (`wrong/` must fail by category, `honest/` must pass)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBLEMS = REPO / "problems"
CORPUS = REPO / "tests" / "corpus"
WRONG = CORPUS / "wrong"
HONEST = CORPUS / "honest"
EXAMPLES = REPO / "examples"

SOFTMAX_PROBLEM = PROBLEMS / "corpus" / "softmax_cases.py"   # the small softmax the case files run on
SOFTMAX_WRONG = WRONG / "softmax"
SOFTMAX_HONEST = HONEST / "softmax"


def softmax_case(name: str) -> Path:
    """A softmax candidate by name, from honest/ or wrong/ (names are unique across both)."""
    name = name.removesuffix(".py")
    for folder in (SOFTMAX_HONEST, SOFTMAX_WRONG):
        if (folder / f"{name}.py").exists():
            return folder / f"{name}.py"
    raise FileNotFoundError(f"no softmax case {name!r} in {SOFTMAX_HONEST} or {SOFTMAX_WRONG}")
