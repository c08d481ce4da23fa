"""Risk runs beyond one process's memory (issue 15; ARCHITECTURE section 7), with the risk kernel unchanged.

- `shards`: populations split by patients into Parquet shards; supports counted per shard and added
- `distributed`: the same shard-and-add plan scheduled on `dask.distributed`
- `trie`: the compiled walk `engine.risk` counts capped supports with (issue 24: a population of 1.37 M
  in process, or a shard, against every known set, up to k)
"""
