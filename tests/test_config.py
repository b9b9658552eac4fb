"""SHAPEJIT_* variables: one module reads them (shapes/config.py), one rule
per kind, a warning (never a crash) for a value it cannot read."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

from shapes import config
from shapes.config import ConfigWarning

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("text, value", [
    ("1", True), ("true", True), ("TRUE", True), ("yes", True), ("on", True), (" On ", True),
    ("0", False), ("false", False), ("False", False), ("no", False), ("off", False), ("", False),
])
def test_booleans_have_one_rule(text, value, monkeypatch):
    for name in ("SHAPEJIT_CHECKS", "SHAPEJIT_BOUNDS_CHECK", "SHAPEJIT_TRACE_CACHE", "SHAPEJIT_CACHE"):
        monkeypatch.setenv(name, text)
        assert config.get(name) is value, name


@pytest.mark.parametrize("text, value", [
    ("1048576", 1 << 20), ("512MiB", 512 << 20), ("1GB", 10 ** 9), ("1GiB", 1 << 30), ("1.5G", 1_500_000_000),
    ("1e6", 10 ** 6), ("64 kib", 64 << 10), ("2T", 2 * 10 ** 12), ("0", 0),
])
def test_sizes_take_units(text, value, monkeypatch):
    monkeypatch.setenv("SHAPEJIT_CACHE_SIZE", text)
    assert config.get("SHAPEJIT_CACHE_SIZE") == value


@pytest.mark.parametrize("name, text", [
    ("SHAPEJIT_CACHE_SIZE", "abc"), ("SHAPEJIT_CACHE_SIZE", "1 GiBs"), ("SHAPEJIT_CACHE_SIZE", "-5"),
    ("SHAPEJIT_CACHE_SIZE", "1e40"), ("SHAPEJIT_CHECKS", "maybe"), ("SHAPEJIT_NUM_THREADS", "two"),
    ("SHAPEJIT_NUM_THREADS", "0"),
])
def test_an_unreadable_value_warns_and_uses_the_default(name, text, monkeypatch):
    monkeypatch.setenv(name, text + " ")  # (a text of its own: each distinct text is parsed, and warned, once)
    with pytest.warns(ConfigWarning, match=re.escape(name)):
        value = config.get(name)
    assert value == config.VARS[name].default


@pytest.mark.slow
@pytest.mark.parametrize("env", [
    {"SHAPEJIT_CACHE_SIZE": "1GiB"}, {"SHAPEJIT_CACHE_SIZE": "1e6"}, {"SHAPEJIT_CACHE_SIZE": "abc"},
    {"SHAPEJIT_NUM_THREADS": "abc"}, {"SHAPEJIT_CHECKS": "false"}, {"SHAPEJIT_CACHE_SIZ": "1"},
])
def test_the_first_call_never_crashes_on_a_setting(env, tmp_path):
    code = ("import numpy as np\n"
            "from jit import jit\n"
            "from shapes import config\n"
            "f = jit(lambda x: x * 2 + 1)\n"
            "assert (f(np.arange(5.0)) == np.arange(5.0) * 2 + 1).all()\n"
            "print('checks', config.get('SHAPEJIT_CHECKS'))\n")
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("SHAPEJIT_")}
    run_env["SHAPEJIT_CALIBRATE"] = "0"  # (no background calibration: conftest.py)
    run_env.update(env, SHAPEJIT_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-W", "always", "-c", code], env=run_env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "checks False" in out.stdout
    unreadable = "abc" in env.values() or "SHAPEJIT_CACHE_SIZ" in env
    assert ("ConfigWarning" in out.stderr) == unreadable, out.stderr


def test_no_other_module_reads_a_shapejit_variable():
    """The one place: shapes/config.py (a test reads them through it too)."""
    readers = []
    for pkg in ("jit", "shapes", "clustering", "codegen", "runtime", "examples", "bench"):
        for path in (ROOT / pkg).rglob("*.py"):
            if path.name == "config.py" and path.parent.name == "shapes":
                continue
            text = path.read_text()
            reads = re.search(r"(environ\.get|getenv)\(\s*[\"']SHAPEJIT_|environ\[\s*[\"']SHAPEJIT_\w*[\"']\s*\]"
                              r"(?!\s*=[^=])", text)
            if reads:
                readers.append(str(path.relative_to(ROOT)))
    assert readers == []


def test_every_variable_is_in_readme():
    readme = (ROOT / "README.md").read_text()
    assert [name for name in config.VARS if name not in readme] == []


def test_a_setting_change_is_seen(monkeypatch):
    monkeypatch.setenv("SHAPEJIT_CACHE_SIZE", "1MiB")
    assert config.get("SHAPEJIT_CACHE_SIZE") == 1 << 20
    monkeypatch.setenv("SHAPEJIT_CACHE_SIZE", "2MiB")
    assert config.get("SHAPEJIT_CACHE_SIZE") == 2 << 20
    monkeypatch.delenv("SHAPEJIT_CACHE_SIZE")
    assert config.get("SHAPEJIT_CACHE_SIZE") == 1 << 30
