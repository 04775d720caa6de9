"""How the console script ends a command it ran in its own process (``entry._exit_after``):
what the interpreter's exit would do, in its order, less the teardown of every object."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import atexit, sys, threading, time
from pathlib import Path
from retriever.entry import _exit_after

out = Path(sys.argv[1])

def late_thread():
    time.sleep(0.3)
    (out / "thread").write_text("joined")

def command():
    atexit.register(lambda: (out / "handler").write_text("ran"))
    threading.Thread(target=late_thread).start()  # not a daemon: the exit waits for it
    sys.stdout.write("x" * {size})
    sys.stdout.write("end")  # buffered, no newline: flushed before the process ends
    {ending}

_exit_after(command)
print("never reached")
"""


# Buffered standard output, as a user's shell gives a command whose output is piped.
BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def _script(tmp_path: Path, ending: str, size: int = 200_001) -> Path:
    script = tmp_path / "cmd.py"
    script.write_text(SCRIPT.format(ending=ending, size=size), "utf-8")
    return script


def _run(tmp_path: Path, ending: str) -> subprocess.CompletedProcess[str]:
    script = _script(tmp_path, ending)
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=BUFFERED,
    )


@pytest.mark.parametrize(
    ("ending", "code", "said"),
    [
        ("pass", 0, ""),
        ("raise SystemExit(None)", 0, ""),
        ("raise SystemExit(3)", 3, ""),
        ("raise SystemExit(258)", 2, ""),  # the status keeps its low byte, as at exit
        ("raise SystemExit(-1)", 255, ""),
        ("raise SystemExit(2**40 + 7)", 7, ""),
        ("raise SystemExit(2**70)", 255, ""),
        ("raise SystemExit(True)", 1, ""),
        ("raise SystemExit('bad setting X')", 1, "bad setting X\n"),
    ],
)
def test_the_exit_keeps_its_code_its_output_threads_and_handlers(
    tmp_path: Path, ending: str, code: int, said: str
) -> None:
    done = _run(tmp_path, ending)
    assert done.returncode == code
    assert done.stdout == "x" * 200_001 + "end"  # all of it, and nothing after the command
    assert done.stderr == said
    assert (tmp_path / "handler").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "joined"


def test_an_unexpected_error_takes_the_usual_way_out(tmp_path: Path) -> None:
    done = _run(tmp_path, "raise ValueError('boom')")
    assert done.returncode == 1
    assert "ValueError: boom" in done.stderr  # the interpreter's own report
    assert (tmp_path / "handler").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "joined"


def test_a_reader_gone_before_the_last_flush_is_no_error(tmp_path: Path) -> None:
    """`retriever search --json | head -c 10`: the exit's flush finds the pipe closed. The
    interpreter would say "Exception ignored ... BrokenPipeError" and exit 120."""
    script = _script(tmp_path, "raise SystemExit(0)", size=100)  # all of it in the buffer
    with subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=BUFFERED,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader went away before the output was flushed
        err = proc.stderr.read()
        assert proc.wait(60) == 0
    assert b"Traceback" not in err and b"BrokenPipe" not in err
    assert (tmp_path / "handler").read_text() == "ran"


THREAD_REGISTERS = """
import atexit, sys, threading, time
from pathlib import Path
from retriever.entry import _exit_after

out = Path(sys.argv[1])

def start_server():  # as retriever.db.start_early's thread: its stop is an exit handler
    time.sleep(0.3)
    atexit.register(lambda: (out / "stopped").write_text("yes"))

def command():
    threading.Thread(target=start_server).start()
    raise SystemExit(0)

_exit_after(command)
"""


def test_an_exit_handler_a_thread_registers_late_still_runs(tmp_path: Path) -> None:
    """Threads are joined before the exit handlers run: the embedded server's start runs
    in a thread and registers the server's stop, which must not be skipped."""
    script = tmp_path / "cmd.py"
    script.write_text(THREAD_REGISTERS, "utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], capture_output=True, timeout=60
    )
    assert done.returncode == 0
    assert (tmp_path / "stopped").read_text() == "yes"


CONSOLE_SCRIPT = """
import sys
from pathlib import Path
import retriever.cli

out = Path(sys.argv[1])

class Teardown:  # freed, and so noted, only by the interpreter's teardown
    def __del__(self):
        (out / "teardown").write_text("ran")

held = Teardown()

def command():
    print("answered")
    raise SystemExit(1)

retriever.cli.main = command
sys.argv = ["retriever", "status"]
from retriever.entry import main
main()
"""


def test_the_console_script_ends_its_own_commands_this_way(tmp_path: Path) -> None:
    script = tmp_path / "cmd.py"
    script.write_text(CONSOLE_SCRIPT, "utf-8")
    env = {**BUFFERED, "RETRIEVER_SERVICE": "off", "RETRIEVER_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert (done.returncode, done.stdout) == (1, "answered\n")
    assert not (tmp_path / "teardown").exists()  # no teardown: the process just ended
