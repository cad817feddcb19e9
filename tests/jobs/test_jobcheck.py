from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command


def test_a_good_file_prints_the_normalised_job(tmp_path: Path, capsys):
    path = tmp_path / "job.yaml"
    path.write_text(
        "protocolVersion: 2\nname: ok\ntype: job\nsecrets: {pw: hunter2}\n"
        "prerequisites: [{name: img, type: dockerimage, uri: python}]\ntaskRoles:\n"
        "  main:\n    dockerImage: img\n    resourcePerInstance: {cpu: 1, memoryMB: 100, gpu: 0}\n"
        "    commands: [echo hi]\n"
    )
    call_command("jobcheck", str(path))
    out = capsys.readouterr().out
    job = json.loads(out)
    assert job["taskRoles"]["main"]["instances"] == 1
    assert "hunter2" not in out


def test_a_bad_file_prints_every_error_and_exits_1(tmp_path: Path, capsys):
    path = tmp_path / "job.yaml"
    path.write_text(
        "protocolVersion: 2\nname: 'bad name'\ntype: job\ntaskRoles:\n"
        "  main:\n    resourcePerInstance: {cpu: 0, memoryMB: 100, gpu: four}\n"
        "    commands: [echo hi]\n"
    )
    with pytest.raises(SystemExit) as exit_info:
        call_command("jobcheck", str(path))
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert "name:" in err
    assert "taskRoles.main.resourcePerInstance.cpu:" in err
    assert "taskRoles.main.resourcePerInstance.gpu:" in err


def test_a_missing_file_is_an_error(tmp_path: Path, capsys):
    with pytest.raises(SystemExit):
        call_command("jobcheck", str(tmp_path / "nope.yaml"))
    assert "nope.yaml" in capsys.readouterr().err
