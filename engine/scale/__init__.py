"""Risk runs beyond one process's memory (issue 15; ARCHITECTURE section 7), with the risk kernel unchanged.

- `shards`: populations split by patients into Parquet shards; supports counted per shard and added
- `distributed`: the same shard-and-add plan scheduled on `dask.distributed`
"""
