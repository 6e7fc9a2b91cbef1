"""A class on many machines: shards and their merge, and grading on a Dask cluster."""
