"""cpuclock counts a loader's worker processes: CPU burnt in children, live
(a persistent DataLoader's workers) or reaped (one-shot workers), appears
in loader_cpu_s and not in self_cpu_s, and an excluded process (the
daemon a benchmark starts) is left out with its children."""
import multiprocessing as mp
import pathlib
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import cpuclock  # noqa: E402

BURN = 0.3  # CPU seconds each child spends


def burn(seconds=BURN):
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass


def burn_and_wait(burnt, done):
    burn()
    burnt.put(1)
    done.wait()


def test_reaped_children_count():
    c, s = cpuclock.loader_cpu_s(), cpuclock.self_cpu_s()
    ps = [mp.get_context("fork").Process(target=burn) for _ in range(2)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    got, own = cpuclock.loader_cpu_s() - c, cpuclock.self_cpu_s() - s
    assert got >= 2 * BURN * 0.9, got
    assert own < BURN, own


def test_live_children_count_and_exclude_leaves_them_out():
    ctx = mp.get_context("fork")
    done, burnt = ctx.Event(), ctx.Queue()
    ps = [ctx.Process(target=burn_and_wait, args=(burnt, done)) for _ in range(2)]
    c = cpuclock.loader_cpu_s()
    for p in ps:
        p.start()
    for _ in ps:
        burnt.get(timeout=60)  # both have burnt and now wait, alive
    live = cpuclock.loader_cpu_s() - c
    without = cpuclock.loader_cpu_s({ps[0].pid}) - c
    done.set()
    for p in ps:
        p.join()
    assert live >= 2 * BURN * 0.9, live
    # The first child excluded: about one child's CPU less (the baseline c
    # held neither child, so the difference is that child's whole burn).
    assert live - without >= BURN * 0.8, (live, without)


def test_a_subprocess_grandchild_counts():
    c = cpuclock.loader_cpu_s()
    code = "import time\nt=time.process_time()\nwhile time.process_time()-t<%s: pass" % BURN
    subprocess.run([sys.executable, "-c", code], check=True)
    assert cpuclock.loader_cpu_s() - c >= BURN * 0.9


def test_process_cpu_s_reads_one_live_process():
    ctx = mp.get_context("fork")
    done, burnt = ctx.Event(), ctx.Queue()
    p = ctx.Process(target=burn_and_wait, args=(burnt, done))
    p.start()
    burnt.get(timeout=60)
    try:
        assert cpuclock.process_cpu_s(p.pid) >= BURN * 0.9
    finally:
        done.set()
        p.join()
    try:
        cpuclock.process_cpu_s(p.pid)  # reaped: gone from /proc
    except ProcessLookupError:
        return
    raise AssertionError("a reaped process still read")
