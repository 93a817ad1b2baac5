"""The controller image's power program as PrologSlurmctld (soperator-wait-nodes): its pure part, the pause schedule
and the wait, run by /bin/sh with the looks at Slurm and the pauses replaced (images/controller/soperator-power)."""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAM = os.path.join(ROOT, "images", "controller", "soperator-power")
BEGIN, END = "# --- pure: tests/unit/test_power_program.py", "# --- pure: end"


def pure():
    with open(PROGRAM, encoding="utf-8") as f:
        text = f.read()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    return text[text.index(BEGIN):text.index(END)]


def sh(script):
    res = subprocess.run(["/bin/sh", "-euc", pure() + script], capture_output=True, text=True, env={}, check=False)
    assert res.returncode == 0, res.stderr
    return res.stdout.split()


def schedule(first, count):
    return sh('d=%d; i=0; while [ "$i" -lt %d ]; do echo "$d"; d=$(next_delay "$d"); i=$((i + 1)); done'
              % (first, count))


def test_the_pause_grows_by_half_and_is_capped_at_two_seconds():
    assert schedule(200, 10) == ["200", "300", "450", "675", "1012", "1518", "2000", "2000", "2000", "2000"]


# `starting` says the nodes are still coming up for the first $up looks; `pause` records each pause.
STUBS = '''
looks=0
starting() { looks=$((looks + 1)); [ "$looks" -le "$up" ]; }
pause() { echo "pause $1"; }
'''


def wait(up, limit_ms):
    out = sh(STUBS + 'up=%d; wait_nodes demo-big-[0-1] %d; echo "looks $looks"' % (up, limit_ms))
    pauses = [int(v) for k, v in zip(out[::2], out[1::2]) if k == "pause"]
    return pauses, int(out[-1])


def test_nodes_already_up_cost_one_look_and_no_pause():
    assert wait(0, 300000) == ([], 1)


def test_it_returns_at_the_first_look_that_finds_them_up():
    pauses, looks = wait(3, 300000)
    assert pauses == [200, 300, 450] and looks == 4


def test_the_pauses_never_add_up_to_more_than_the_limit():
    # ResumeTimeout 10 s, nodes that never come up: 200 ... 2000 ms, the last cut to what is left of the 10 s.
    pauses, looks = wait(1000, 10000)
    assert sum(pauses) == 10000
    assert pauses == [200, 300, 450, 675, 1012, 1518, 2000, 2000, 1845] and looks == len(pauses)


def test_a_slow_node_is_looked_at_every_two_seconds_not_five_times_a_second():
    # ResumeTimeout 300 s (the default): 5 times a second would be 1,500 looks per starting job.
    pauses, looks = wait(100000, 300000)
    assert sum(pauses) == 300000 and looks == len(pauses) < 160
    assert max(pauses) == 2000
