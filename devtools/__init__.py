"""Developer tooling that never ships (in neither the wheel nor the image): `make run`'s launcher, the
child-process helpers, and the private MariaDB/Redis servers of the tests and the benchmarks."""
