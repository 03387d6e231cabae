import importlib


def test_thunder_dynamo_imports() -> None:
    module = importlib.import_module("thunder.dynamo")
    assert module.__doc__
