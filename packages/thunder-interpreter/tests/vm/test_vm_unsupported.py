import pytest

from thunder.interpreter.vm import InterpreterError, InterpreterHooks, interpret


async def coroutine_function(x):
    return x


def test_async_def_raises_interpreter_error():
    with pytest.raises(InterpreterError) as info:
        interpret(coroutine_function, (1,), {}, InterpreterHooks())
    message = str(info.value)
    assert "async" in message and f"{__file__}:6" in message


def test_calling_coroutine_from_interpreted_code():
    def f():
        return coroutine_function(1)

    with pytest.raises(InterpreterError) as info:
        interpret(f, (), {}, InterpreterHooks())
    assert f"{__file__}:19" in str(info.value)


def test_unsupported_instruction_names_construct_and_location():
    import types

    def shell():
        return 1

    # An await inside a coroutine code object run as a plain function: GET_AWAITABLE.
    async def uses_await(x):
        return await x

    fake = types.FunctionType(uses_await.__code__.replace(co_flags=shell.__code__.co_flags), globals())
    with pytest.raises(InterpreterError) as info:
        interpret(fake, (None,), {}, InterpreterHooks())
    message = str(info.value)
    assert "thunder's interpreter does not support the" in message
    assert "await" in message and f"{__file__}:" in message


def test_user_handlers_cannot_swallow_interpreter_errors():
    def f():
        try:
            return coroutine_function(1)
        except Exception:
            return "swallowed"

    with pytest.raises(InterpreterError):
        interpret(f, (), {}, InterpreterHooks())
