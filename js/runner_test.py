"""Tests of the runner's Python helpers, run under Pyodide by python_test.ts:
each test_ function is a step there, and fails it by raising."""

import dataclasses
import datetime
import decimal
import enum
import json
import math
import uuid

import builtins

import _mcp_ask
from _mcp_encode import cut_text, dump_json, format_error, json_string
from _mcp_runner import run


def test_cut_text() -> None:
    snake = '\U0001f40d'  # 4 bytes in UTF-8
    cases = [
        # (text, limit, want)
        ('abc', 0, None),  # no limit
        ('abc', 3, None),
        ('abcd', 3, ('abc', 4)),
        ('é' * 3, 6, None),
        ('é' * 3, 5, ('éé', 6)),  # never half a character
        ('x' + snake, 4, ('x', 5)),
        (snake * 2, 7, (snake, 8)),
        (snake, 3, ('', 4)),
        ('a\ud800b', 2, ('a', 5)),  # a lone surrogate is 3 bytes, surrogatepass
        ('a' * 10, 9, ('a' * 9, 10)),
    ]
    for text, limit, want in cases:
        got = cut_text(text, limit)
        assert got == want, f'cut_text({text!r}, {limit}) = {got!r}, want {want!r}'


class Color(enum.Enum):
    RED = 'red'


@dataclasses.dataclass
class Point:
    x: int
    y: float


def test_dump_json() -> None:
    cases = [
        # (value, want): pydantic_core's to_json(indent=2), as upstream's return values
        (1.0, '1.0'),
        (-0.0, '-0.0'),
        (1e16, '1e16'),
        (123456789012345.6, '123456789012345.6'),
        (1e-5, '0.00001'),
        (1e-6, '1e-6'),
        (0.0001, '0.0001'),
        (float('nan'), 'null'),
        (float('inf'), 'null'),
        (True, 'true'),
        (10**5000, '1' + '0' * 5000),  # past int_max_str_digits
        ([], '[]'),
        ({}, '{}'),
        ([1, 'é'], '[\n  1,\n  "é"\n]'),
        ({'a': {'b': None}}, '{\n  "a": {\n    "b": null\n  }\n}'),
        ({1: 'x', 2.5: 'y', None: 'z', (1, 'a'): 'w'}, '{\n  "1": "x",\n  "2.5": "y",\n  "None": "z",\n  "1,a": "w"\n}'),
        (Color.RED, '"red"'),
        (b'bytes', '"bytes"'),
        (decimal.Decimal('1.10'), '"1.10"'),
        (uuid.UUID(int=1), '"00000000-0000-0000-0000-000000000001"'),
        (datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc), '"2024-01-02T03:04:05Z"'),
        (datetime.timedelta(days=1, seconds=2, microseconds=500000), '"P1DT2.5S"'),
        (datetime.timedelta(seconds=-1), '"-PT1S"'),
        (Point(1, 2.0), '{\n  "x": 1,\n  "y": 2.0\n}'),
        ({1, 2} and frozenset([3]), '[\n  3\n]'),
        (object, repr(object).join('""')),
    ]
    for value, want in cases:
        got = dump_json(value)
        assert got == want, f'dump_json({value!r}) = {got!r}, want {want!r}'


def test_dump_json_refuses() -> None:
    loop: list = []
    loop.append(loop)
    for value, want in ((loop, 'Circular reference'), (b'\xff', 'not UTF-8')):
        try:
            dump_json(value)
        except ValueError as e:
            assert want in str(e), f'dump_json({value!r}) raised {e}, want {want!r}'
        else:
            raise AssertionError(f'dump_json({value!r}) raised nothing')


def test_json_string() -> None:
    assert json_string('é"\n') == '"é\\"\\n"'


def test_run_result() -> None:
    """run's result frames: the return value, cut to the limit, and errors."""
    cases = [
        # (code, limit, error_limit, want)
        ('None', 0, 0, {'type': 'result', 'status': 'success'}),
        ('"ab"', 0, 0, {'type': 'result', 'status': 'success', 'return_string': True, 'return_value': 'ab'}),
        ('[1]', 0, 0, {'type': 'result', 'status': 'success', 'return_string': False, 'return_value': [1]}),
        (
            '"é" * 4',
            5,
            0,
            {'type': 'result', 'status': 'success', 'return_string': True, 'return_value': 'éé', 'return_cut': 8},
        ),
        (
            '[1234]',
            4,
            0,
            {'type': 'result', 'status': 'success', 'return_string': True, 'return_value': '[\n  ', 'return_cut': 10},
        ),
        # a str subclass cannot slip past the limit with its own len or encode
        (
            'class S(str):\n    def __len__(self): return 0\nS("abcdef")',
            3,
            0,
            {'type': 'result', 'status': 'success', 'return_string': True, 'return_value': 'abc', 'return_cut': 6},
        ),
    ]
    for code, limit, error_limit, want in cases:
        got = json.loads(run(code, limit, error_limit))
        assert got == want, f'run({code!r}, {limit}) = {got!r}, want {want!r}'


def test_run_error() -> None:
    got = json.loads(run('def f():\n    1 / 0\nf()'))
    assert got['status'] == 'run-error', got
    want = (
        'Traceback (most recent call last):\n'
        '  File "main.py", line 3, in <module>\n'
        '    f()\n'
        '    ~^^\n'
        '  File "main.py", line 2, in f\n'
        '    1 / 0\n'
        '    ~~^~~\n'
        'ZeroDivisionError: division by zero\n'
    )
    assert got['error'] == want, f'error {got["error"]!r}, want {want!r}'
    got = json.loads(run('raise ValueError("x" * 100)', 0, 20))
    assert got['error'].startswith('Traceback') and len(got['error']) == 20, got
    assert got['error_cut'] > 100, got


def test_format_error_hides_the_runner() -> None:
    try:
        dump_json(b'\xff')
    except ValueError as e:
        text = format_error(e)
    assert '<mcp-run-python>' not in text, text
    assert text.startswith('Traceback') and text.endswith('are not UTF-8 text\n'), text


def test_float_round_trip() -> None:
    for x in (0.1, 1 / 3, 2.5e-300, 1.7976931348623157e308, 5e-324, 1e15, 123.0):
        assert float(dump_json(x)) == x and math.copysign(1, float(dump_json(x))) == math.copysign(1, x), x


_ASK_NAMES = ('llm_query', 'llm_query_batched', 'ask_user', 'AskError', 'LLMQueryError', 'AskUserError', 'UserDeclinedError')


def test_ask_names() -> None:
    """A run that may ask has the names it may use, and no other; they go
    as it ends, input() back to its own, and a run that may ask nothing
    leaves what its code made alone."""
    own_input = builtins.input
    cases = [
        # (spec, names defined, input replaced)
        ({'model': True}, {'llm_query', 'llm_query_batched', 'AskError', 'LLMQueryError'}, False),
        ({'person': True}, {'ask_user', 'AskError', 'AskUserError', 'UserDeclinedError'}, True),
        ({'model': True, 'person': True}, set(_ASK_NAMES), True),
    ]
    check = 'import builtins\n[[n for n in names if hasattr(builtins, n)], input is own_input]'
    for spec, names, replaced in cases:
        got = json.loads(run(check, ask=json.dumps(spec), global_variables={'names': _ASK_NAMES, 'own_input': own_input}))
        want = sorted(names, key=_ASK_NAMES.index)
        assert got['return_value'] == [want, not replaced], f'{spec}: {got}'
        assert [n for n in _ASK_NAMES if hasattr(builtins, n)] == [] and builtins.input is own_input, f'{spec}: left behind'
    builtins.llm_query = 'mine'
    try:
        json.loads(run('1'))
        assert builtins.llm_query == 'mine', 'a run that may ask nothing took a name of its code'
    finally:
        del builtins.llm_query


def test_ask_arguments() -> None:
    """What the code passes is checked before anything is asked: types with
    TypeError, sizes and values with ValueError, each saying which."""
    cases = [
        ('llm_query(5)', TypeError, 'llm_query() argument prompt must be str, not int'),
        ('llm_query("a", system=b"x")', TypeError, 'llm_query() argument system must be str, not bytes'),
        ('llm_query("a", max_tokens=True)', TypeError, 'llm_query() argument max_tokens must be int, not bool'),
        ('llm_query("a", max_tokens=0)', ValueError, 'llm_query() argument max_tokens must be positive, not 0'),
        ('llm_query("a", temperature="hot")', TypeError, 'llm_query() argument temperature must be int or float, not str'),
        ('llm_query("a", temperature=float("nan"))', ValueError, 'llm_query() argument temperature must be a finite number of at least 0, not nan'),
        ('llm_query("a", model_hint=1)', TypeError, 'llm_query() argument model_hint must be str, not int'),
        ('llm_query("é" * 6)', ValueError, 'llm_query() argument prompt is 12 bytes, past the limit of 10 bytes: send a shorter text, or slices of it'),
        ('llm_query("a\\ud800")', ValueError, "llm_query() argument prompt is not text that UTF-8 can carry: surrogates not allowed at 1"),
        ('llm_query_batched("abc")', TypeError, 'llm_query_batched() argument prompts must be a list of str, not str'),
        ('llm_query_batched(["a", 2])', TypeError, 'llm_query_batched() argument prompts[1] must be str, not int'),
        ('llm_query_batched(["a"] * 3)', ValueError, 'llm_query_batched(): 3 prompts, past the limit of 2 in one round: send them in rounds of 2'),
        ('ask_user(None)', TypeError, 'ask_user() argument message must be str, not NoneType'),
        ('ask_user("a", "b")', TypeError, 'ask_user() argument schema must be a dict (a JSON schema) or None, not str'),
        ('ask_user("a", {"a": {1}})', TypeError, 'ask_user() argument schema must be JSON: Object of type set is not JSON serializable'),
        ('ask_user("a", {"type": "object", "title": "long"})', ValueError, 'ask_user() argument schema is 32 bytes, past the limit of 10 bytes: send a shorter text, or slices of it'),
    ]
    spec = json.dumps({'model': True, 'person': True, 'batch': 2, 'prompt_bytes': 10})
    for code, kind, message in cases:
        got = json.loads(run(f'try:\n    {code}\nexcept Exception as e:\n    r = [type(e).__name__, str(e)]\nr', ask=spec))
        want = [kind.__name__, message]
        assert got.get('return_value') == want, f'{code}: {got}, want {want}'


def test_ask_outside_a_run() -> None:
    """A function kept from a run that could ask asks nothing after it."""
    run('import builtins\nbuiltins.kept = llm_query', ask=json.dumps({'model': True}))
    try:
        builtins.kept('a')
    except _mcp_ask.AskError as e:
        want = 'llm_query() cannot ask: this call may not ask anything (the server needs --sampling or --elicitation)'
        assert str(e) == want and type(e) is _mcp_ask.LLMQueryError, repr(e)
    else:
        raise AssertionError('a kept llm_query asked')
    finally:
        del builtins.kept
