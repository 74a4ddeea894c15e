"""Where the scenario's tools are served to a remote agent (``tool_server:``, ``convsim run
--tool-host/--tool-port/--tool-url``; convsim/slots/toolserver.py).

The A2A agent of tests/test_agent_slots_remote_tools.py (searches, books, makes one refused call
through examples/remote_tools.py) runs against a run whose tool server listens beyond loopback and
tells the agent a URL on this machine's non-loopback address: the calls arrive through that URL,
the run prints the one-line warning. Told that URL while listening on 127.0.0.1 only (the old
behaviour), the agent cannot reach its tools. Bad values: one line naming the field, exit 2,
nothing written.
"""
from __future__ import annotations

import ipaddress
import json
import socket
import subprocess
import urllib.error
import urllib.request

import pytest

from cli_helpers import cli, one_line
from test_agent_slots_remote import serve_a2a
from test_agent_slots_remote_tools import a2a_agent, served  # noqa: F401 — fixtures

from convsim.slots import toolserver
from convsim.slots.toolserver import ToolServerConfig

WARNING = "the random token in each turn's tool URL is the only credential"


def _machine_address() -> str | None:
    """One of this machine's non-loopback IPv4 addresses that accepts a connection to itself."""
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError):
        out = []
    for text in out:
        try:
            ip = ipaddress.ip_address(text)
        except ValueError:
            continue
        if ip.version == 4 and not ip.is_loopback:
            return text
    return None


ADDRESS = _machine_address()
needs_address = pytest.mark.skipif(ADDRESS is None, reason="the machine has no non-loopback IPv4 address")


def _run(tmp_path, spec, *args, run_id="r"):
    code, out, exc = cli("run", "customer_service", "--sessions", 2, "--set", "max_turns=2", "--agent",
                         f"service={spec}", "--out", tmp_path / "runs", "--run-id", run_id, "--no-analysis", "-q",
                         *args)
    records = []
    results = tmp_path / "runs" / run_id / "results.jsonl"
    if results.exists():
        records = [json.loads(x) for x in results.read_text().splitlines()]
    return code, out, exc, records


def _seen(served):
    path = served / "seen_urls.txt"
    urls = path.read_text().split() if path.exists() else []
    path.unlink(missing_ok=True)
    return urls


def _check_booked(records):
    assert len(records) == 2 and {r["status"] for r in records} == {"ok"}, [r.get("error") for r in records]
    for r in records:
        first = next(e for e in r["transcript"] if e["speaker"] == "system")
        assert [c["name"] for c in first["meta"]["tool_calls"]] == ["find_entities", "book"]
        assert len(first["meta"]["tool_errors"]) == 1
        assert r["dialogue_metrics"]["bookings_made"] == 1


@needs_address
def test_tools_listening_on_every_interface_are_called_through_the_advertised_url(tmp_path, served, a2a_agent):
    code, out, exc, records = _run(tmp_path, a2a_agent, "--tool-host", "0.0.0.0", "--tool-url", f"http://{ADDRESS}")
    assert code == 0, (out, exc)
    warnings = [line for line in out.splitlines() if WARNING in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: the tool server listens on 0.0.0.0"), out
    assert toolserver.server().httpd.server_address[0] == "0.0.0.0"  # what it bound
    _check_booked(records)  # every call went to the advertised address and reached the session's tools
    urls = _seen(served)
    port = toolserver.server().httpd.server_address[1]
    assert len(urls) >= 4 and all(u.startswith(f"http://{ADDRESS}:{port}/tools/") for u in urls), urls
    for url in urls:  # served at that address, and dead once the turn ended
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url, timeout=5)
        assert err.value.code == 404


@needs_address
def test_the_workers_of_the_process_executor_serve_the_tools_as_configured(tmp_path, served, a2a_agent):
    """Each worker process plans the run again (``_init_worker``) and starts its own server with
    the run's ``tool_server:``: the agent is told the machine's address, at each worker's port."""
    code, out, exc, records = _run(tmp_path, a2a_agent, "--tool-host", "0.0.0.0", "--tool-url", f"http://{ADDRESS}",
                                   "--executor", "process", "--workers", 2)
    assert code == 0, (out, exc)
    assert sum(WARNING in line for line in out.splitlines()) == 1, out  # the driver's line, not the workers'
    _check_booked(records)
    urls = _seen(served)
    assert len(urls) >= 4 and all(u.startswith(f"http://{ADDRESS}:") for u in urls), urls


@needs_address
def test_tools_listening_on_the_machine_address_tell_that_address_by_default(tmp_path, served, a2a_agent):
    code, out, exc, records = _run(tmp_path, a2a_agent, "--tool-host", ADDRESS)
    assert code == 0, (out, exc)
    assert sum(WARNING in line for line in out.splitlines()) == 1, out
    _check_booked(records)
    urls = _seen(served)
    assert urls and all(u.startswith(f"http://{ADDRESS}:") for u in urls), urls
    with pytest.raises(OSError):  # not on loopback: 127.0.0.1 at that port has no server
        urllib.request.urlopen(f"http://127.0.0.1:{toolserver.server().httpd.server_address[1]}/tools/x", timeout=5)


@needs_address
def test_told_an_address_it_does_not_listen_on_the_agent_cannot_call_its_tools(tmp_path, served, a2a_agent):
    """The defect the bind address fixes, injected: the server on 127.0.0.1 (the old, only choice)
    while the agent is told the machine's address, as an agent on another host would need."""
    code, out, exc, records = _run(tmp_path, a2a_agent, "--tool-url", f"http://{ADDRESS}")
    assert WARNING not in out  # loopback: no warning
    assert records and all(r["status"] == "agent_failure" for r in records), [r["status"] for r in records]
    assert all(not r.get("agent_bookings") for r in records)
    assert "Connection refused" in records[0]["error"] or "refused" in records[0]["error"].lower(), records[0]["error"]


def test_the_default_stays_on_loopback_without_a_warning(tmp_path, served, a2a_agent):
    code, out, exc, records = _run(tmp_path, a2a_agent)
    assert code == 0 and WARNING not in out, (out, exc)
    _check_booked(records)
    assert toolserver.server().httpd.server_address[0] == "127.0.0.1"
    assert all(u.startswith("http://127.0.0.1:") for u in _seen(served))


@pytest.mark.parametrize("args, field, words", [
    (["--tool-host", "tools.example.org"], "tool_server.host", "not an IP address"),
    (["--tool-host", "300.1.2.3"], "tool_server.host", "not an IP address"),
    (["--tool-url", "10.0.0.5:8080"], "tool_server.url", "not an http:// or https:// URL"),
    (["--tool-url", "ftp://10.0.0.5"], "tool_server.url", "not an http:// or https:// URL"),
    (["--tool-url", "http://10.0.0.5:99999"], "tool_server.url", "Port out of range"),
    (["--tool-url", "http://10.0.0.5/?k=1"], "tool_server.url", "not a query"),
    (["--tool-host", "0.0.0.0"], "tool_server.url", "needs the URL the agent reaches"),
    (["--tool-port", "70000"], "tool_server.port", "65535"),
    (["--tool-port", "8765", "--executor", "process"], "tool_server.port", "is for one process"),
])
def test_bad_tool_server_values_are_one_line_and_write_nothing(tmp_path, args, field, words):
    one_line(["run", "hello_chat", "--sessions", 1, "--out", tmp_path / "runs", "--run-id", "r", "--no-analysis",
              *args], field, words)
    assert not (tmp_path / "runs").exists()


def test_a_bad_tool_server_in_a_config_file_names_the_file(tmp_path):
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(f"graph: hello_chat\nout_dir: {tmp_path / 'runs'}\ntool_server: {{host: 0.0.0.0, url: "
                   f"'//10.0.0.5'}}\n")
    line = one_line(["run", cfg, "--no-analysis"], "exp.yaml", "tool_server.url", "not an http:// or https:// URL")
    assert "Traceback" not in line and not (tmp_path / "runs").exists()


def test_a_port_it_cannot_listen_on_is_one_line_before_anything_is_written(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        one_line(["run", "hello_chat", "--sessions", 1, "--agent", "agent=a2a:http://127.0.0.1:9", "--out",
                  tmp_path / "runs", "--run-id", "r", "--no-analysis", "--tool-port", port],
                 "tool_server.port", "cannot listen on 127.0.0.1 port")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("settings, port, url", [
    ({}, 4100, "http://127.0.0.1:4100"),
    ({"host": "192.0.2.7"}, 4100, "http://192.0.2.7:4100"),
    ({"host": "::"}, 4100, None),  # a wildcard needs a url: checked above
    ({"host": "::1"}, 4100, "http://[::1]:4100"),
    ({"host": "0.0.0.0", "url": "http://10.0.0.5/"}, 4100, "http://10.0.0.5:4100"),
    ({"host": "0.0.0.0", "url": "https://tools.example.org:443/convsim"}, 4100, "https://tools.example.org:443/convsim"),
    ({"host": "0.0.0.0", "port": 8080, "url": "http://gw.example.org/c"}, 8080, "http://gw.example.org:8080/c"),
])
def test_the_url_the_agent_is_told(settings, port, url):
    from convsim.errors import ConvsimError
    if url is None:
        with pytest.raises(ConvsimError):
            ToolServerConfig(**settings)
        return
    cfg = ToolServerConfig(**settings)
    assert cfg.base_url(port) == url
    assert (cfg.warning() is not None) == (cfg.host not in ("127.0.0.1", "::1"))
