"""Workspace repositories built from the project's own environment (.venv).

tff_rec's Python packages come from the virtual environment `make setup`
builds, not from downloads: the Python toolchain runs .venv/bin/python, every
`requirement()` is an empty library (the interpreter has the package), and
local_config_tf holds TensorFlow's headers and framework library from that
environment's tf.sysconfig (for the op's cc_binary).
"""

_SETUP_FIRST = "no Python environment at .venv: run make setup first"

def _venv_python(repository_ctx):
    workspace = repository_ctx.path(Label("//:WORKSPACE")).dirname
    return workspace.get_child(".venv").get_child("bin").get_child("python")

def _venv_toolchain_impl(repository_ctx):
    python = _venv_python(repository_ctx)
    # Checked when a target runs: a clear message instead of an import error.
    repository_ctx.file("python.sh", "\n".join([
        "#!/bin/sh",
        "if [ ! -x '%s' ]; then" % python,
        "  echo 'tff_rec: %s (%s)' >&2" % (_SETUP_FIRST, python),
        "  exit 1",
        "fi",
        "exec '%s' \"$@\"" % python,
        "",
    ]), executable = True)
    repository_ctx.file("BUILD", """
load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")
load("@rules_python//python:defs.bzl", "py_runtime")

py_runtime(
    name = "venv_runtime",
    interpreter = "python.sh",
    python_version = "PY3",
    stub_shebang = "#!/usr/bin/env python3",
)

py_runtime_pair(name = "venv_pair", py3_runtime = ":venv_runtime")

toolchain(
    name = "venv_toolchain",
    toolchain = ":venv_pair",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)
""")

venv_toolchain = repository_rule(implementation = _venv_toolchain_impl, local = True)

def _pypi_impl(repository_ctx):
    names = repository_ctx.attr.packages
    repository_ctx.file("requirements.bzl", "\n".join([
        '"""requirement(name): the package, from the project\'s environment."""',
        "",
        "def requirement(name):",
        '    return "@pypi//:" + name',
        "",
    ]))
    repository_ctx.file("BUILD", "\n".join(
        ['package(default_visibility = ["//visibility:public"])', ""] +
        ['py_library(name = "%s")' % name for name in names],
    ) + "\n")

pypi = repository_rule(
    implementation = _pypi_impl,
    attrs = {"packages": attr.string_list()},
    local = True,
)

def _local_config_tf_impl(repository_ctx):
    python = _venv_python(repository_ctx)
    if not python.exists:
        fail("tff_rec: " + _SETUP_FIRST)
    found = repository_ctx.execute([python, "-c", "\n".join([
        "import tensorflow as tf",
        "print(tf.sysconfig.get_include())",
        "print(tf.sysconfig.get_lib())",
    ])], environment = {"TF_CPP_MIN_LOG_LEVEL": "3"})
    if found.return_code:
        fail("tff_rec: TensorFlow does not import in .venv: " + found.stderr)
    include, lib = found.stdout.strip().split("\n")[-2:]
    repository_ctx.symlink(include, "include")
    repository_ctx.symlink(lib + "/libtensorflow_framework.so.2", "libtensorflow_framework.so.2")
    repository_ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "tf_header_lib",
    hdrs = glob(["include/**"], exclude = ["include/**/*.so*"]),
    includes = ["include"],
)

cc_library(
    name = "libtensorflow_framework",
    srcs = ["libtensorflow_framework.so.2"],
)
""")

local_config_tf = repository_rule(implementation = _local_config_tf_impl, local = True)
