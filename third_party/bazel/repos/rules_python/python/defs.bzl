"""A stand-in for rules_python's defs.bzl: Bazel 4's native Python rules.

Offline builds (issue 19): the real rules_python would be downloaded."""

def py_binary(**kwargs):
    native.py_binary(**kwargs)

def py_library(**kwargs):
    native.py_library(**kwargs)

def py_test(**kwargs):
    native.py_test(**kwargs)

def py_runtime(**kwargs):
    native.py_runtime(**kwargs)
