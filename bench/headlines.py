"""The headline rows of docs/benchmarks.md: for each result in bench/results/, one row per peer it
was compared with, read from the result's own tables (no figure here is measured or typed in).

A row: what was compared, against which peer (as its table names it, with how it was run), what
headway did against it, CPU a request and p99 of each where the result has them. `rows(result)`
picks the rule by the result's name; a result of a kind no rule knows is an error, so a new
bench script cannot land without its line on the page.
"""


def rows(result):
    """The headline rows of one result (a dict as bench/results.py writes it)."""
    name = result["name"]
    for prefix, rule in RULES:
        if name == prefix or name.startswith(prefix + "-"):
            return list(rule(result))
    raise ValueError(f"bench/headlines.py has no rule for the result {name!r}")


def table_rows(table):
    """The rows of `table` as dicts keyed by its column names."""
    return [dict(zip(table["columns"], row)) for row in table["rows"]]


def short_title(result):
    """A result's title up to its colon: 'WSGI hello world', 'The lab'."""
    return result["title"].split(":")[0]


def both(mine, theirs, unit):
    return f"{mine} / {theirs} {unit}"


def lower(mine, theirs, what):
    """'6.03x lower p99' (the peer's figure over headway's), or '2.00x higher p99' where the
    peer's is the lower one."""
    ratio = float(theirs) / float(mine)
    return f"{ratio:.2f}x lower {what}" if ratio >= 1 else f"{1 / ratio:.2f}x higher {what}"


def row(what, against, headway, cpu="-", p99="-"):
    return {"what": what, "against": against, "headway": headway, "cpu": cpu, "p99": p99}


CPU_RATIO, SHARED_RATIO = "headway's CPU/req vs it", "headway vs it, sharing wrk's session"


def versus(result, p99_ratio=False):
    """bench/versus.sh's throughput parts, and bench/static.sh: wrk against each server, a table per
    endpoint; CPU a request first, then requests/s with the servers in sessions of their own and
    sharing wrk's; with `p99_ratio`, how much lower headway's p99 was too."""
    # "2 workers each, wrk -t1 -c64 -d5s", and what else the run had ("beside a busy neighbour").
    how = ", ".join(result["summary"].split(", ")[:2])
    beside = result["title"].partition(", beside ")[2]
    how += f", beside {beside}" if beside else ""
    for table in result["tables"]:
        endpoint = table["title"].split(":")[0]
        servers = table_rows(table)
        mine = next(server for server in servers if server["server"] == "headway")
        for theirs in servers:
            if theirs is mine:
                continue
            cpu, shared = theirs.get(CPU_RATIO, "-"), theirs.get(SHARED_RATIO, "-")
            figures = ([f"{cpu} CPU/req"] if cpu != "-" else []) + [f"{theirs['headway vs it']} req/s"]
            if shared != "-":
                figures[-1] += f" ({shared} sharing wrk's session)"
            if p99_ratio:
                figures.append(lower(mine["p99 ms"], theirs["p99 ms"], "p99"))
            yield row(f"{short_title(result)} {endpoint}; {how}", theirs["server"], ", ".join(figures),
                      both(mine["CPU us/req"], theirs["CPU us/req"], "µs"),
                      both(mine["p99 ms"], theirs["p99 ms"], "ms"))


def rails_page(result):
    """bench/versus.sh's rails part: as the other parts, and the p99 against each server, which
    issue 55 asks to be lower on a Rails page along with the requests/s."""
    return versus(result, p99_ratio=True)


def bodies(result):
    """bench/versus.sh's bodies part: MB/s of uploads and downloads, CPU a transfer."""
    servers = table_rows(result["tables"][0])
    mine = servers[0]
    for theirs in servers[1:]:
        up, down = theirs["headway vs it (up / down)"].split(" / ")
        mine_cpu, theirs_cpu = (server["CPU ms a transfer (up / down)"].split(" / ") for server in (mine, theirs))
        yield row("64 MiB uploads and downloads", theirs["server"], f"up {up}, down {down} MB/s",
                  f"up {both(mine_cpu[0], theirs_cpu[0], 'ms')}, down {both(mine_cpu[1], theirs_cpu[1], 'ms')}"
                  " a transfer")


def keepalive_tail(result):
    """Seed 000 with hey: p99 of a 200 ms endpoint, keep-alive on."""
    servers = [server for server in table_rows(result["tables"][0]) if server["keep-alive"] == "on"]
    mine = servers[0]
    for theirs in servers[1:]:
        clients = result["title"].partition("tail")[2]  # ", 15 clients" where not the seed's 10
        yield row(f"seed 000's keep-alive tail (hey){clients}", theirs["server"],
                  lower(mine["p99 ms"], theirs["p99 ms"], "p99"),
                  p99=both(mine["p99 ms"], theirs["p99 ms"], "ms"))


def lab(result):
    """The lab's scenarios: headway as it ships against each peer, in the scenario's key case."""
    scenario = result["name"].removeprefix("lab-")
    servers = table_rows(result["tables"][0])
    if scenario == "overload":
        case = "240/s for 10 s (3 x capacity)"
        servers = [server for server in servers if server["case"] == case]
        column, what = "2xx p99 ms", "p99 of the served, 3 x capacity"
    else:
        keep = {"keepalive-tail": {"keep-alive": "on"}, "mixed-tail": {"loop": "closed", "keep-alive": "on"},
                "multiplexed": {"streams": "8"}}[scenario]
        servers = [server for server in servers
                   if all(server[key] == value for key, value in keep.items()) and server.get("lanes") != "off"]
        column = "99%" if scenario == "keepalive-tail" else "fast 99%"
        what = "p99" if column == "99%" else "fast requests' p99"
    mine = next(server for server in servers if server["server"] == "headway")
    unit = "ms" if column.endswith("ms") else "x ideal"
    for theirs in servers:
        if theirs is not mine:
            yield row(f"lab {scenario}", theirs["server"], lower(mine[column], theirs[column], what),
                      p99=both(mine[column], theirs[column], unit))


def daily(result):
    """The lab's daily scenario: the adaptive pool against fixed -w 8 (and -w 2) over the day."""
    servers = table_rows(result["tables"][-1])
    mine = next(server for server in servers if "-w 2:8" in server["server"])
    for theirs in servers:
        if theirs is not mine:
            ratio = 1 / float(theirs["worker-s / -w 8"]) * float(mine["worker-s / -w 8"])
            yield row("lab daily: -w 2:8 against a fixed pool", theirs["server"],
                      f"{ratio:.2f}x its worker-seconds, {lower(mine['2xx p99 ms'], theirs['2xx p99 ms'], 'p99')}, "
                      f"goodput {mine['goodput %']} % / {theirs['goodput %']} %",
                      p99=both(mine["2xx p99 ms"], theirs["2xx p99 ms"], "ms"))


def h2load(result):
    """HTTP/2 over TLS with h2load: requests/s against granian."""
    mine, theirs = table_rows(result["tables"][0])
    yield row("HTTP/2 hello world over TLS (h2load)", theirs["server"], f"{mine['vs granian']:.2f}x req/s",
              both(mine["CPU us/req"], theirs["CPU us/req"], "µs"))


def front_ceiling(result):
    """The front alone, with stub workers: its CPU a request and requests/s for each number of
    front threads, each against the floor's CPU a request where the run measured it."""
    rows = table_rows(result["tables"][0])
    floor = next((r for r in rows if str(r["front threads"]).startswith("floor")), None)
    for threads in rows:
        cpu = f"front {threads['front CPU us/req']} µs"
        if threads is floor:
            yield row("the floor: a tokio server that answers at once (no headway)", "-",
                      f"{threads['req/s']:,} req/s", f"{threads['front CPU us/req']} µs")
            continue
        if floor:
            cpu += f" ({threads['front CPU us/req'] / floor['front CPU us/req']:.1f}x the floor's)"
        yield row(f"the front alone (stub workers), {threads['front threads']} front thread(s)", "-",
                  f"{threads['req/s']:,} req/s", cpu)


def load_vs_wrk(result):
    """The load generator's own speed against wrk and hey."""
    tools = table_rows(result["tables"][1])
    mine = next(tool for tool in tools if tool["tool"] == "headway load")
    for tool in tools:
        if tool is not mine:
            ratio = mine["median of the rounds' ratios"] / tool["median of the rounds' ratios"]
            yield row("headway load's requests/s, one core", tool["tool"], f"{ratio:.2f}x req/s")


def preload_memory(result):
    """PSS of 4 Django workers with --preload."""
    servers = {server["server"]: server for server in table_rows(result["tables"][0])}
    mine = servers["headway --preload (Django)"]
    theirs = servers["gunicorn --preload (Django)"]
    yield row("memory of 4 Django workers, --preload", theirs["server"],
              f"{mine['PSS MiB'] / theirs['PSS MiB']:.2f}x its PSS ({both(mine['PSS MiB'], theirs['PSS MiB'], 'MiB')})")
    # A Rack app's: headway's Rack worker with --preload against Puma's preload_app!.
    for name, mine in servers.items():
        app = name.removeprefix("headway --preload ")
        puma = next((server for other, server in servers.items()
                     if other.startswith("Puma") and other.endswith(f"--preload {app}")), None)
        if app != name and app != "(Django)" and puma:
            yield row(f"memory of 4 workers of {app.strip('()')}, --preload", puma["server"],
                      f"{mine['PSS MiB'] / puma['PSS MiB']:.2f}x its PSS "
                      f"({both(mine['PSS MiB'], puma['PSS MiB'], 'MiB')})")


def soak(result):
    """An hour of mixed traffic: the front's memory and descriptors, and failures."""
    figures = {figure["figure"]: figure for figure in table_rows(result["tables"][0])}
    yield row("soak: an hour of mixed traffic, reloads", "-",
              f"front RSS {figures['front RSS, MiB']['change %']:+.1f} %, descriptors "
              f"{figures['descriptors']['change %']:+.1f} % after the warm-up")


def fuzz(result):
    """libFuzzer over the HTTP/1 parsers."""
    targets = table_rows(result["tables"][0])
    crashes = sum(target["crashes"] for target in targets)
    yield row("fuzzing the HTTP/1 parsers", "-",
              f"{crashes} crashes in {sum(target['executions'] for target in targets):,} executions")


RULES = [
    ("versus-bodies", bodies),
    ("versus-rails", rails_page),
    ("versus", versus),
    ("static", versus),
    ("keepalive-tail", keepalive_tail),
    ("lab-daily", daily),
    ("lab", lab),
    ("h2load", h2load),
    ("front-ceiling", front_ceiling),
    ("load-vs-wrk", load_vs_wrk),
    ("preload-memory", preload_memory),
    ("soak", soak),
    ("fuzz", fuzz),
]
