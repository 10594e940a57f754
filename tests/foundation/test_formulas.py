import pytest

from d2kgrade import formulas


@pytest.mark.parametrize(
    "text,env,expected",
    [
        ("2*M*N*K", {"M": 3, "N": 5, "K": 7}, 210),
        ("4*B*S*S/(2 if causal else 1)", {"B": 2, "S": 4, "causal": True}, 64.0),
        ("4*B*S*S/(2 if causal else 1)", {"B": 2, "S": 4, "causal": False}, 128.0),
        ("E*(1 - (1 - 1/E)**T)", {"E": 2, "T": 1}, 1.0),
        ("(H + 2*pad - R)//stride + 1", {"H": 56, "pad": 1, "R": 3, "stride": 1}, 56),
        ("cdiv(N, 128) + max(1, M)", {"N": 129, "M": 0}, 3),
    ],
)
def test_evaluate(text, env, expected):
    assert formulas.evaluate(text, env) == expected


@pytest.mark.parametrize(
    "text",
    ["__import__('os').system('true')", "x.real", "[1, 2]", "lambda: 1", "open('f')", "'a' * 3", "f(1)"],
)
def test_rejects_code(text):
    with pytest.raises(formulas.FormulaError):
        formulas.evaluate(text, {"x": 1, "f": 1})


def test_errors_name_the_problem():
    with pytest.raises(formulas.FormulaError, match="'Q'"):
        formulas.evaluate("M*Q", {"M": 1})
    with pytest.raises(formulas.FormulaError, match="divides by zero"):
        formulas.evaluate("M/0", {"M": 1})
    with pytest.raises(formulas.FormulaError, match="too large"):
        formulas.evaluate("2**100000", {})
    with pytest.raises(formulas.FormulaError, match="not a number"):
        formulas.evaluate("M*2", {"M": "uniform"})


def test_shapes():
    assert formulas.eval_shape("[M, K/128]", {"M": 4, "K": 256}) == (4, 2)
    assert formulas.eval_shape("[E+1]", {"E": 8}) == (9,)
    assert formulas.eval_shape("[]", {}) == ()
    with pytest.raises(formulas.FormulaError, match="whole number"):
        formulas.eval_shape("[K/3]", {"K": 4})
    with pytest.raises(formulas.FormulaError):
        formulas.eval_shape("M, N", {"M": 1, "N": 1})
