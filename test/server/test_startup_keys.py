"""Keys with several tokenizer workers are refused at start-up (#51): SGLang would check none."""

from __future__ import annotations

import pytest

from sglang_duet.server.startup import check_keys


@pytest.mark.parametrize("api_key, admin_api_key, flag", [
    ("k", None, "--api-key"), (None, "a", "--admin-api-key"), ("k", "a", "--api-key")])
def test_keys_need_one_tokenizer_worker(api_key, admin_api_key, flag):
    why = check_keys(api_key, admin_api_key, 2)
    assert why is not None and why.startswith(flag) and "--tokenizer-worker-num 1" in why
    assert check_keys(api_key, admin_api_key, 1) is None


def test_no_keys_any_workers():
    assert check_keys(None, None, 4) is None


def test_the_launcher_refuses_before_starting(capsys):
    from helpers.server import free_port
    from sglang_duet.launch_server import resolve

    with pytest.raises(SystemExit) as e:
        resolve(["--host", "127.0.0.1", "--port", str(free_port()), "--admin-api-key", "a-key",
                 "--tokenizer-worker-num", "2"])
    assert e.value.code == 2
    assert "--admin-api-key: SGLang checks keys only with" in capsys.readouterr().err
