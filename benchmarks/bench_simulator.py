"""Throughput of the judge simulator.

The client (aiohttp, keep-alive, ``--concurrency`` workers) runs in this process; the
server runs in a child process (``JudgeSimulator.subprocess``) unless the scenario says
in-process, where both share one GIL. Prints the figures and writes
``benchmarks/results/simulator.json``.

    python benchmarks/bench_simulator.py [--seconds 4] [--concurrency 64] [--no-litellm]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from framekit.testing import JudgeSimulator, SimulatorConfig  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "simulator.json"

SCHEMA = {
    "type": "object",
    "properties": {
        "explanation": {"type": "string"},
        "label": {
            "type": "string",
            "enum": [
                "Not At All",
                "Not Generally",
                "Neutral/Mixed",
                "Generally Yes",
                "Completely Yes",
            ],
        },
    },
    "required": ["explanation", "label"],
    "additionalProperties": False,
}


def chat_body(i: int) -> dict[str, Any]:
    """A ResponseRelevance-sized request (about 1 kB), distinct per ``i``."""
    question = f"How do I rotate the logs of service number {i} without restarting it?"
    answer = "Use logrotate with copytruncate, or send SIGHUP if the service reopens files. " * 4
    prompt = (
        "You judge whether the response answers the request.\n"
        f"[BEGIN DATA: input]\n{question}\n[END DATA: input]\n"
        f"[BEGIN DATA: output]\n{answer}\n[END DATA: output]\n"
        "Explain, then choose a label."
    )
    return {
        "model": "sim",
        "messages": [
            {"role": "system", "content": "You are a careful evaluator."},
            {"role": "user", "content": prompt},
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "judgement", "schema": SCHEMA, "strict": True},
        },
    }


def embedding_body(i: int) -> dict[str, Any]:
    """Four short texts per request, as AnswerRelevancy sends them."""
    return {"model": "sim-embed", "input": [f"question {i} about topic {k}" for k in range(4)]}


async def hammer(url: str, make_body: Any, seconds: float, concurrency: int) -> dict[str, Any]:
    """Keep ``concurrency`` requests in flight for ``seconds``; count and time them."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    deadline = time.perf_counter() + seconds
    bodies = [json.dumps(make_body(i)).encode() for i in range(1000)]
    headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker(offset: int) -> None:
            k = offset
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                async with session.post(url, data=bodies[k % 1000], headers=headers) as resp:
                    await resp.read()
                    statuses[resp.status] = statuses.get(resp.status, 0) + 1
                latencies.append(time.perf_counter() - started)
                k += concurrency

        began = time.perf_counter()
        await asyncio.gather(*(worker(n) for n in range(concurrency)))
        elapsed = time.perf_counter() - began
    latencies.sort()
    return {
        "requests": len(latencies),
        "seconds": round(elapsed, 3),
        "requests_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 2),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
    }


async def litellm_rate(api_base: str, count: int, concurrency: int) -> dict[str, Any]:
    """End-to-end ``litellm.acompletion`` calls per second against the simulator."""
    os.environ["LITELLM_OFFLINE_MODE"] = "true"
    import litellm

    semaphore = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        body = chat_body(i)
        async with semaphore:
            await litellm.acompletion(
                model="openai/sim",
                api_base=api_base,
                api_key="sk-bench",
                num_retries=0,
                messages=body["messages"],
                response_format=body["response_format"],
            )

    await one(-1)  # first call builds clients; keep it out of the timing
    began = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    elapsed = time.perf_counter() - began
    return {
        "requests": count,
        "seconds": round(elapsed, 3),
        "requests_per_s": round(count / elapsed, 1),
    }


def process_cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU seconds of a process (Linux ``/proc``; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(pid: int | None, run: Any) -> dict[str, Any]:
    """Run ``run()`` and add the server's and the client's CPU per request to its result."""
    server_before = process_cpu_seconds(pid)
    client_before = time.process_time()
    result: dict[str, Any] = run()
    client_cpu = time.process_time() - client_before
    server_after = process_cpu_seconds(pid)
    n = max(1, result["requests"])
    result["client_cpu_us_per_request"] = round(client_cpu / n * 1e6, 1)
    if server_before is not None and server_after is not None and pid != os.getpid():
        server_us = (server_after - server_before) / n * 1e6
        result["server_cpu_us_per_request"] = round(server_us, 1)
        # What one server core could answer if the client and other load were free.
        result["server_capacity_per_core"] = round(1e6 / server_us, 0) if server_us else None
    return result


def scenario(name: str, result: dict[str, Any], served: int) -> dict[str, Any]:
    """Print one line and check the server counted what the client sent."""
    result = {"scenario": name, **result, "server_counted": served}
    line = f"{name:<40} {result['requests_per_s']:>8.1f} req/s"
    if "p50_ms" in result:
        line += f"  p50 {result['p50_ms']:>6.2f} ms  p99 {result['p99_ms']:>6.2f} ms"
    if "server_cpu_us_per_request" in result:
        line += f"  server {result['server_cpu_us_per_request']:.0f} us/req"
    line += f"  client {result['client_cpu_us_per_request']:.0f} us/req"
    print(line + f"  ({result['requests']} requests)")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--no-litellm", action="store_true")
    args = parser.parse_args()
    secs, conc = args.seconds, args.concurrency
    results = []
    load_before = os.getloadavg()

    with JudgeSimulator.subprocess(SimulatorConfig()) as sim:
        for name, path, make, latency in (
            ("subprocess chat json_schema, latency 0", "/v1/chat/completions", chat_body, 0.0),
            ("subprocess embeddings x4, latency 0", "/v1/embeddings", embedding_body, 0.0),
            ("subprocess chat, latency 50 ms", "/v1/chat/completions", chat_body, 0.05),
        ):
            sim.configure(latency=latency)
            sim.reset()
            url = sim.base_url + path
            out = measured(sim.pid, lambda: asyncio.run(hammer(url, make, secs, conc)))  # noqa: B023
            stats = sim.stats()
            out["server_max_in_flight"] = stats["max_in_flight"]
            results.append(scenario(name, out, stats["total"]))
        if not args.no_litellm:
            sim.configure(latency=0.0)
            sim.reset()
            out = measured(sim.pid, lambda: asyncio.run(litellm_rate(sim.api_base, 600, conc)))
            results.append(scenario("litellm.acompletion -> subprocess", out, sim.stats()["total"]))

    with JudgeSimulator(SimulatorConfig()) as local:
        url = local.base_url + "/v1/chat/completions"
        out = measured(None, lambda: asyncio.run(hammer(url, chat_body, secs, conc)))
        results.append(scenario("in-process chat (shares the GIL)", out, local.stats()["total"]))

    report = {
        "benchmark": "judge simulator throughput",
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            # Other processes share the 2 cores; throughput moves with this.
            "load_average_1m_before_after": [
                round(load_before[0], 2),
                round(os.getloadavg()[0], 2),
            ],
        },
        "client": f"aiohttp {aiohttp.__version__}, keep-alive, concurrency {conc}",
        "seconds_per_scenario": secs,
        "results": results,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
