"""What a ranged GET costs on a moto server by the size of the object it reads from:
`python -m bench.moto_ranges [--runs 20]`.

moto 5.2.5 answers a ranged GET by reading the whole object, S3 reads only the range; the local
runner's `s3.ranges` patch (`agent_knowledge_dev/moto_s3.py`) reads only the range too. The
cold-path benchmarks' warm hint reads (`bench.segments_child`) run on the local runner's moto, so
this shows moto's cost apart from the product's (bench/README.md, "The cold path (issue 36)"). One
18 KB range — about one chunk text block — read `runs` times from each object, on moto's own server
and on one with the local runner's patches (the two alternate per read), p50 wall; loopback only."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

SIZES = (20_000, 1_000_000, 10_000_000, 28_000_000)
BUCKET = "moto-ranges"


def measure(runs: int) -> dict[str, dict[str, float]]:
    import boto3

    from bench.environment import moto_server

    variants = {"moto": False, "local_patches": True}
    walls: dict[str, dict[int, list[float]]] = {name: {size: [] for size in SIZES} for name in variants}
    with moto_server() as moto_url, moto_server(local_patches=True) as patched_url:
        credentials = {"aws_access_key_id": "bench", "aws_secret_access_key": "bench"}
        clients = {
            name: boto3.client("s3", endpoint_url=url, region_name="us-east-1", **credentials)
            for name, url in (("moto", moto_url), ("local_patches", patched_url))
        }
        for client in clients.values():
            client.create_bucket(Bucket=BUCKET)
            for size in SIZES:
                client.put_object(Bucket=BUCKET, Key=f"object-{size}", Body=os.urandom(size))
        for size in SIZES:
            for _ in range(runs):
                for name, client in clients.items():
                    started = time.perf_counter()
                    client.get_object(Bucket=BUCKET, Key=f"object-{size}", Range="bytes=1000-19000")["Body"].read()
                    walls[name][size].append(time.perf_counter() - started)
    return {
        name: {f"{size}_bytes_p50_ms": round(statistics.median(times) * 1000, 2) for size, times in sizes.items()}
        for name, sizes in walls.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    arguments = parser.parse_args()
    print(json.dumps({"load_average": os.getloadavg(), "ranged_get": measure(arguments.runs)}, indent=1))


if __name__ == "__main__":
    main()
