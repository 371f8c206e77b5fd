"""Reads `perf script -F comm,tid,cpu,time,event,trace` of a `sched:sched_switch` recording on
stdin and says where the CPUs went idle, how long one thread (headway's front) waited for a
CPU while it could run, and how much of the idle time passed while it so waited on another
CPU's run queue (time the kernel could have given it and did not). Used by
bench/sched-trace.sh; see there for why.

Usage: perf script ... | python3 bench/sched_trace.py FRONT_TID
"""

import bisect
import re
import sys
from collections import defaultdict

SWITCH = re.compile(
    r"\s*.+?\s+\d+\s+\[(?P<cpu>\d+)\]\s+(?P<time>[\d.]+):\s+sched:sched_switch:\s+"
    r"prev_comm=(?P<prev>.+?) prev_pid=(?P<prev_tid>\d+) .*prev_state=(?P<state>\S+) ==> "
    r"next_comm=.+? next_pid=(?P<next_tid>\d+)"
)


def percentile(values, share):
    return values[min(len(values) - 1, int(share * len(values)))] if values else float("nan")


def thread_kind(comm):
    """A thread's name without its number: headway-slot-3 and headway-slot-4 count together."""
    return comm.rstrip("0123456789-") or comm


def overlap_with_waits(spells, waits):
    """Seconds of the idle `spells` (start, end, cpu) during which the front was waiting, runnable,
    on another CPU's run queue (`waits`: start, end, cpu it waits on; sorted by start)."""
    starts = [start for start, _, _ in waits]
    total = 0.0
    for start, end, cpu in spells:
        # Waits never overlap each other (one thread), so scanning from the last one that began
        # before this spell finds every wait that overlaps it.
        for wait_start, wait_end, wait_cpu in waits[max(bisect.bisect_left(starts, start) - 1, 0) :]:
            if wait_start >= end:
                break
            if wait_cpu != cpu:
                total += max(0.0, min(end, wait_end) - max(start, wait_start))
    return total


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    front = sys.argv[1]
    first = last = None
    idle_since = {}  # cpu -> (time, what went to sleep before)
    idle = defaultdict(lambda: [0, 0.0])  # what slept -> [episodes, seconds]
    spells = []  # (start, end, cpu) of every idle spell
    front_out = None  # (time, state, cpu) of the front's last switch-out
    waits, sleeps = [], 0  # (start, end, cpu it waited on) of its runnable waits; its sleeps
    cpus = set()
    for line in sys.stdin:
        event = SWITCH.match(line)
        if not event:
            continue
        time, cpu = float(event["time"]), event["cpu"]
        cpus.add(cpu)
        first = time if first is None else first
        last = time
        if event["next_tid"] == "0":
            idle_since[cpu] = (time, f"{thread_kind(event['prev'])} ({event['state']})")
        elif event["prev_tid"] == "0" and cpu in idle_since:
            since, before = idle_since.pop(cpu)
            idle[before][0] += 1
            idle[before][1] += time - since
            spells.append((since, time, cpu))
        if event["prev_tid"] == front:
            front_out = (time, event["state"], cpu)
        if event["next_tid"] == front and front_out:
            if front_out[1] == "R":
                waits.append((front_out[0], time, front_out[2]))
            else:
                sleeps += 1
            front_out = None
    if first is None or last == first:
        sys.exit("no sched_switch events on stdin")
    span = last - first
    total_idle = sum(seconds for _, seconds in idle.values())
    share = total_idle / (span * len(cpus)) * 100
    print(f"span {span:.2f} s; idle {total_idle * 1000:.0f} ms of CPU time ({share:.1f} % of the {len(cpus)} CPUs)")
    print("idle episodes, by the thread that went off the CPU before (state: S sleeping, R runnable):")
    for before, (episodes, seconds) in sorted(idle.items(), key=lambda item: -item[1][1])[:6]:
        print(f"  {before:32} {episodes:6} episodes, mean {seconds / episodes * 1e6:5.0f} µs, {seconds * 1000:6.1f} ms")
    print(f"front thread {front}: put off the CPU while runnable {len(waits)} times, went to sleep {sleeps} times")
    if waits:
        lengths = sorted(end - start for start, end, _ in waits)
        print(
            "  waits for a CPU while runnable: "
            + ", ".join(f"p{int(q * 100)} {percentile(lengths, q) * 1e6:.0f} µs" for q in (0.5, 0.9, 0.99))
            + f"; {sum(lengths) * 1000:.0f} ms in all ({sum(lengths) / span * 100:.0f} % of the span)"
        )
    if total_idle:
        stranded = overlap_with_waits(spells, waits)
        print(
            f"idle while the front waited, runnable, on the other CPU's queue: {stranded * 1000:.0f} ms"
            f" ({stranded / total_idle * 100:.0f} % of the idle time)"
        )


if __name__ == "__main__":
    main()
