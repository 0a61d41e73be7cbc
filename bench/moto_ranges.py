"""What a ranged GET costs on a moto server by the size of the object it reads from:
`python -m bench.moto_ranges [--runs 20]`.

moto answers a ranged GET by reading the whole object, S3 reads only the range; the cold-path
benchmarks' warm hint reads (`bench.segments_child`) run on moto, so this separates moto's cost
from the product's (bench/README.md, "The cold path (issue 36)"). One 18 KB range — about one chunk
text block — read `runs` times from each object, p50 wall; loopback only."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

SIZES = (20_000, 1_000_000, 10_000_000, 28_000_000)
BUCKET = "moto-ranges"


def measure(runs: int) -> dict[str, float]:
    import boto3

    from bench.environment import moto_server

    found: dict[str, float] = {}
    with moto_server() as url:
        client = boto3.client(
            "s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="bench", aws_secret_access_key="bench"
        )
        client.create_bucket(Bucket=BUCKET)
        for size in SIZES:
            client.put_object(Bucket=BUCKET, Key=f"object-{size}", Body=os.urandom(size))
        for size in SIZES:
            walls = []
            for _ in range(runs):
                started = time.perf_counter()
                client.get_object(Bucket=BUCKET, Key=f"object-{size}", Range="bytes=1000-19000")["Body"].read()
                walls.append(time.perf_counter() - started)
            found[f"{size}_bytes_p50_ms"] = round(statistics.median(walls) * 1000, 2)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    arguments = parser.parse_args()
    print(json.dumps({"load_average": os.getloadavg(), "ranged_get": measure(arguments.runs)}, indent=1))


if __name__ == "__main__":
    main()
