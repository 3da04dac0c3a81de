"""llm_query, llm_query_batched, ask_user and input(): what a run's code asks
of the client's model and of the person at the client. Each call is one
round: an ask frame through the runner (run.ts's Replies), which the
supervisor checks, bounds and relays (supervisor/asks.go), and waits for
its answer frame with pyodide.ffi.run_sync, so that the functions are
plain blocking ones, in async code too.

Installed as _mcp_ask by pymodules.ts, before _mcp_runner, whose run
enables them for a run that may ask (bridge.RunFrame.Ask) and disables them
as it ends. Only then are they builtins, with their exceptions: a run that
may ask nothing sees none of it, and input() is Pyodide's own.
"""

import builtins
import json
import math


class AskError(RuntimeError):
    """A question the code asked got no answer: the server refused it (a
    limit, a kind of question this call may not ask), the wait ran out, or
    the call was stopped. The message says which."""


class LLMQueryError(AskError):
    """llm_query or llm_query_batched got no answer from the model. For a
    batch, answers holds each prompt's answer (a str) or error (an
    LLMQueryError), in order, when the round itself was answered."""

    def __init__(self, message: str, answers: list | None = None) -> None:
        super().__init__(message)
        self.answers = answers


class AskUserError(AskError):
    """ask_user or input() got no answer from the person."""


class UserDeclinedError(AskUserError, EOFError):
    """The person declined to answer, or cancelled. An EOFError too, as
    input() raises at the end of its input."""


# They are builtins while a run may ask, and tracebacks name them so.
for _error in (AskError, LLMQueryError, AskUserError, UserDeclinedError):
    _error.__module__ = 'builtins'
del _error


class _State:
    """What the current run may ask: its bridge.AskSpec, or None between
    runs; and the builtins its names replaced."""

    def __init__(self) -> None:
        self.spec: dict | None = None
        self.saved: dict[str, object] = {}


_state = _State()
_MISSING = object()


def enable(spec: str) -> None:
    """Defines the names the run may use, of spec (a bridge.AskSpec as
    JSON), as builtins: every module the code imports sees them too."""
    _state.spec = json.loads(spec)
    names: dict[str, object] = {'AskError': AskError}
    if _state.spec.get('model'):
        names.update(llm_query=llm_query, llm_query_batched=llm_query_batched, LLMQueryError=LLMQueryError)
    if _state.spec.get('person'):
        names.update(ask_user=ask_user, input=_input, AskUserError=AskUserError, UserDeclinedError=UserDeclinedError)
    for name, value in names.items():
        _state.saved[name] = builtins.__dict__.get(name, _MISSING)
        setattr(builtins, name, value)


def disable() -> None:
    """Puts back what enable replaced: the next run of a session, or of no
    session, sees the interpreter as it was."""
    if _state.spec is None:
        return  # a run that could ask nothing: what it did is its own
    for name, value in _state.saved.items():
        if value is _MISSING:
            builtins.__dict__.pop(name, None)
        else:
            setattr(builtins, name, value)
    _state.saved.clear()
    _state.spec = None


def llm_query(
    prompt: str,
    *,
    system: str | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    model_hint: str | None = None,
) -> str:
    """Asks the client's model prompt and returns its answer. system is
    the system prompt, max_tokens the most the answer may take (the
    server's limit when None or larger), temperature and model_hint the
    client's to honour. Raises LLMQueryError when no answer comes."""
    question = _sample('llm_query', 'prompt', prompt, system, max_tokens, temperature, model_hint)
    return _ask('llm_query', [question], LLMQueryError)[0]


def llm_query_batched(
    prompts: list[str],
    *,
    system: str | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    model_hint: str | None = None,
) -> list[str]:
    """Asks the client's model every prompt of prompts at once, in one
    round, and returns the answers in order; the other arguments are
    llm_query's, for every prompt. Raises LLMQueryError when a prompt gets
    no answer: its answers attribute holds the others'."""
    if isinstance(prompts, (str, bytes)) or not hasattr(prompts, '__iter__'):
        raise TypeError(f'llm_query_batched() argument prompts must be a list of str, not {type(prompts).__name__}')
    questions = [
        _sample('llm_query_batched', f'prompts[{i}]', p, system, max_tokens, temperature, model_hint)
        for i, p in enumerate(prompts)
    ]
    if not questions:
        return []
    return _ask('llm_query_batched', questions, LLMQueryError)


def ask_user(message: str, schema: dict | None = None) -> object:
    """Asks the person at the client message. With schema, the JSON schema
    of an object (a dict), the answer is such an object (a dict); without,
    it is a str. Raises UserDeclinedError when the person declines, and
    AskUserError when no answer comes otherwise."""
    _check('ask_user() argument message', message, str)
    question: dict[str, object] = {'kind': 'person', 'message': message}
    if schema is not None:
        if not isinstance(schema, dict):
            raise TypeError(f'ask_user() argument schema must be a dict (a JSON schema) or None, not {type(schema).__name__}')
        try:
            text = json.dumps(schema, ensure_ascii=False, allow_nan=False, separators=(',', ':'))
        except (TypeError, ValueError) as e:
            raise TypeError(f'ask_user() argument schema must be JSON: {e}') from None
        _check_size('ask_user() argument schema', text)
        question['schema'] = schema
    _check_size('ask_user() argument message', message)
    return _ask('ask_user', [question], AskUserError)[0]


def _input(prompt: object = '') -> str:
    """Asks the person at the client for a line, prompt the question, and
    returns it without its newline. Raises UserDeclinedError (an EOFError)
    when the person declines."""
    message = str(prompt) or 'The running code asks for a line of input.'
    _check_size('input() argument prompt', message)
    answer = _ask('input', [{'kind': 'person', 'message': message}], AskUserError)[0]
    return answer.removesuffix('\n')


_input.__name__ = _input.__qualname__ = 'input'


def _sample(
    func: str,
    what: str,
    prompt: object,
    system: object,
    max_tokens: object,
    temperature: object,
    model_hint: object,
) -> dict[str, object]:
    """The question of one prompt of func, its arguments checked; what
    names the prompt in errors."""
    _check(f'{func}() argument {what}', prompt, str)
    _check_size(f'{func}() argument {what}', prompt)
    question: dict[str, object] = {'kind': 'model', 'prompt': prompt}
    if system is not None:
        _check(f'{func}() argument system', system, str)
        _check_size(f'{func}() argument system', system)
        question['system'] = system
    if max_tokens is not None:
        _check(f'{func}() argument max_tokens', max_tokens, int)
        if max_tokens <= 0:
            raise ValueError(f'{func}() argument max_tokens must be positive, not {max_tokens}')
        question['max_tokens'] = max_tokens
    if temperature is not None:
        _check(f'{func}() argument temperature', temperature, (int, float))
        if not math.isfinite(temperature) or temperature < 0:
            raise ValueError(f'{func}() argument temperature must be a finite number of at least 0, not {temperature}')
        question['temperature'] = float(temperature)
    if model_hint is not None:
        _check(f'{func}() argument model_hint', model_hint, str)
        _check_size(f'{func}() argument model_hint', model_hint)
        question['model_hint'] = model_hint
    return question


def _check(what: str, value: object, kind: type | tuple[type, ...]) -> None:
    # bool is an int, and no number a question takes.
    if not isinstance(value, kind) or isinstance(value, bool):
        names = ' or '.join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__
        raise TypeError(f'{what} must be {names}, not {type(value).__name__}')


def _check_size(what: str, text: str) -> None:
    try:
        size = len(text.encode())
    except UnicodeEncodeError as e:
        raise ValueError(f'{what} is not text that UTF-8 can carry: {e.reason} at {e.start}') from None
    limit = (_state.spec or {}).get('prompt_bytes', 0)
    if limit and size > limit:
        raise ValueError(f'{what} is {size} bytes, past the limit of {limit} bytes: send a shorter text, or slices of it')


def _ask(what: str, questions: list[dict], error: type[AskError]) -> list:
    """Asks one round and returns its answers: a str, or a dict for a
    question with a schema."""
    spec = _state.spec
    if spec is None:
        raise error(f'{what}() cannot ask: this call may not ask anything (the server needs --sampling or --elicitation)')
    batch = spec.get('batch', 0)
    if batch and len(questions) > batch:
        raise ValueError(f'{what}(): {len(questions)} prompts, past the limit of {batch} in one round: send them in rounds of {batch}')
    frame = json.dumps(questions, ensure_ascii=False, separators=(',', ':'))
    size, limit = len(frame.encode()), spec.get('frame_bytes', 0)
    if limit and size > limit:
        raise ValueError(f'{what}(): this round is {size} bytes as JSON, past the limit of {limit}: send fewer or shorter texts')

    from pyodide.ffi import can_run_sync, run_sync

    if not can_run_sync():
        raise error(f'{what}() cannot wait for an answer here: call it from the code of the run, not from a JavaScript callback')
    from _mcp_ask_bridge import ask

    reply = json.loads(run_sync(ask(frame)))
    if reply.get('error'):
        raise error(reply['error'])
    answers: list = []
    failed = None
    for i, (question, answer) in enumerate(zip(questions, reply.get('answers') or [], strict=True)):
        if answer.get('error') or answer.get('declined'):
            why = answer.get('error') or 'declined'
            if len(questions) > 1:
                why = f'prompt {i}: {why}'
            kind = UserDeclinedError if answer.get('declined') and question['kind'] == 'person' else error
            answers.append(kind(why))
            failed = failed or answers[-1]
        elif 'schema' in question:
            answers.append(answer.get('value'))
        else:
            answers.append(answer.get('text', ''))
    if failed is not None:
        if len(questions) > 1:
            raise error(f'{what}(): {sum(isinstance(a, AskError) for a in answers)} of {len(questions)} got no answer; the first, {failed}', answers)
        raise failed
    return answers
