"""Settings readers refuse what they cannot read, naming the variable."""

from __future__ import annotations

import pytest

from portal.env import (
    ConfigError,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_port_range,
    env_secret,
)


def test_env_int_reads_an_integer(monkeypatch):
    monkeypatch.setenv("X_INT", "42")
    assert env_int("X_INT", 1) == 42


def test_env_int_refuses_text_and_names_the_variable(monkeypatch):
    monkeypatch.setenv("X_INT", "forty")
    with pytest.raises(ConfigError, match="X_INT"):
        env_int("X_INT", 1)


def test_env_int_refuses_values_below_the_minimum(monkeypatch):
    monkeypatch.setenv("X_INT", "0")
    with pytest.raises(ConfigError, match=">= 1"):
        env_int("X_INT", 5, minimum=1)


def test_env_float_uses_the_default_when_unset(monkeypatch):
    monkeypatch.delenv("X_FLOAT", raising=False)
    assert env_float("X_FLOAT", 2.5) == 2.5


def test_env_bool_accepts_only_true_or_false(monkeypatch):
    monkeypatch.setenv("X_BOOL", "True")
    assert env_bool("X_BOOL", False) is True
    monkeypatch.setenv("X_BOOL", "yes")
    with pytest.raises(ConfigError, match="X_BOOL"):
        env_bool("X_BOOL", False)


def test_env_list_splits_on_commas(monkeypatch):
    monkeypatch.setenv("X_LIST", "a, b,,c")
    assert env_list("X_LIST", []) == ["a", "b", "c"]


def test_env_secret_reads_the_file_named_by_name_file(monkeypatch, tmp_path):
    secret = tmp_path / "s"
    secret.write_text("from-file\n")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert env_secret("X_SECRET", "default") == "from-file"


def test_env_secret_names_a_file_it_cannot_read(monkeypatch, tmp_path):
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="X_SECRET_FILE"):
        env_secret("X_SECRET", "default")


def test_env_port_range_reads_first_and_last_inclusive(monkeypatch):
    monkeypatch.setenv("X_PORTS", "20000-20099")
    assert env_port_range("X_PORTS") == range(20000, 20100)
    monkeypatch.setenv("X_PORTS", "")
    assert env_port_range("X_PORTS") is None


@pytest.mark.parametrize("raw", ["20000", "20099-20000", "0-10", "1-70000", "a-b"])
def test_env_port_range_refuses_what_is_not_a_range_of_ports(monkeypatch, raw):
    monkeypatch.setenv("X_PORTS", raw)
    with pytest.raises(ConfigError, match="X_PORTS"):
        env_port_range("X_PORTS")
