"""bench/sched_trace.py on a small hand-made trace: the idle spells, the front's waits, and the idle
time that passed while the front waited on the other CPU's queue."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "sched_trace.py"


def switch(cpu, time, prev, prev_tid, state, next_, next_tid):
    return (
        f"{prev} {prev_tid} [{cpu:03}] {time:.6f}: sched:sched_switch: prev_comm={prev} prev_pid={prev_tid} "
        f"prev_prio=120 prev_state={state} ==> next_comm={next_} next_pid={next_tid} next_prio=120\n"
    )


def test_idle_while_the_front_waits_elsewhere_is_counted():
    trace = "".join(
        [
            # CPU 0: the front (tid 100) is put off its CPU, runnable, for 500 µs.
            switch(0, 1.000000, "headway", 100, "R", "headway-slot-1", 201),
            # CPU 1 meanwhile idles for 300 µs: stranded idle time.
            switch(1, 1.000100, "headway-slot-6", 206, "S", "swapper/1", 0),
            switch(1, 1.000400, "swapper/1", 0, "R", "headway-slot-6", 206),
            switch(0, 1.000500, "headway-slot-1", 201, "S", "headway", 100),
            # Later, CPU 1 idles 100 µs while the front runs on CPU 0: not stranded.
            switch(1, 1.002000, "headway-slot-6", 206, "S", "swapper/1", 0),
            switch(1, 1.002100, "swapper/1", 0, "R", "headway-slot-6", 206),
            # And CPU 0 idles 200 µs after the front goes to sleep: not a wait.
            switch(0, 1.003000, "headway", 100, "S", "swapper/0", 0),
            switch(0, 1.003200, "swapper/0", 0, "R", "headway", 100),
        ]
    )
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "100"], input=trace, capture_output=True, text=True, check=True
    )
    out = result.stdout
    assert "idle 1 ms of CPU time" in out
    assert "headway-slot (S)                      2 episodes, mean   200 µs" in out
    assert "headway (S)                           1 episodes, mean   200 µs" in out
    assert "put off the CPU while runnable 1 times, went to sleep 1 times" in out
    assert "p50 500 µs" in out
    # 300 µs of the 600 µs idle.
    assert "on the other CPU's queue: 0 ms (50 % of the idle time)" in out


def test_usage_without_the_fronts_thread():
    result = subprocess.run([sys.executable, str(SCRIPT)], input="", capture_output=True, text=True)
    assert result.returncode != 0
    assert "Usage:" in result.stderr
