"""Tests of the runner's Python helpers, run under Pyodide by python_test.ts:
each test_ function is a step there, and fails it by raising."""

import dataclasses
import datetime
import decimal
import enum
import json
import math
import uuid

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
