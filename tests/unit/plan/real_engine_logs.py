# ruff: noqa: E501 (the real engines' log lines are kept whole, as they were printed)
"""Log lines of real engine starts, copied from logs that people published from real runs (each block says where),
for tests/unit/plan/start/test_start_phases.py."""

# SGLang on one GPU, 2025-08 (github: a MinerU-on-Blackwell README's server log), from weight loading on.
SGLANG_2025 = """\
Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00,  4.34it/s]
[2025-08-08 03:34:38] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=13.91 GB, mem usage=1.25 GB.
[2025-08-08 03:34:38] KV Cache is allocated. #tokens: 104273, K size: 5.57 GB, V size: 5.57 GB
[2025-08-08 03:34:38] Memory pool end. avail mem=2.43 GB
[2025-08-08 03:34:38] Capture cuda graph begin. This can take up to several minutes. avail mem=1.80 GB
[2025-08-08 03:34:38] Capture cuda graph bs [1, 2, 4, 8]
Capturing batches (bs=1 avail_mem=1.72 GB): 100%|█████████████████████| 4/4 [00:18<00:00,  4.57s/it]
[2025-08-08 03:34:56] Capture cuda graph end. Time elapsed: 18.28 s. mem usage=0.11 GB. avail mem=1.70 GB.
[2025-08-08 03:34:57] max_total_num_tokens=104273, chunked_prefill_size=2048, max_prefill_tokens=16384, max_running_requests=2048, context_len=40960, available_gpu_mem=1.70 GB
[2025-08-08 03:34:58] INFO:     Started server process [1]
[2025-08-08 03:34:58] INFO:     Waiting for application startup.
[2025-08-08 03:34:58] INFO:     Application startup complete.
[2025-08-08 03:34:58] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2025-08-08 03:34:59] INFO:     127.0.0.1:38328 - "GET /get_model_info HTTP/1.1" 200 OK
[2025-08-08 03:34:59] Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0,
[2025-08-08 03:35:18] INFO:     127.0.0.1:38344 - "POST /generate HTTP/1.1" 200 OK
[2025-08-08 03:35:18] The server is fired up and ready to roll!
[2025-08-08 03:35:19] Decode batch. #running-req: 1, #token: 47, token usage: 0.00, cuda graph: True, gen throughput (token/s): 2.18, #queue-req: 0,
"""

# SGLang 2026 (a Ling/Bailing deployment guide's log, 2026-08): `elapsed=`, per-capture-set graph lines, and no
# `Memory pool end` line: the KV cache phase ends where graph capture begins.
SGLANG_2026 = """\
[2026-08-17 16:52:10] Load weight end. elapsed=100.59 s, type=BailingMoeV3ForCausalLM, avail mem=97.27 GB, mem usage=15.47 GB.
[2026-08-17 16:52:12] Mamba Cache is allocated. max_mamba_cache_size: 614, conv_state size: 0.38GB, ssm_state size: 10.81GB
[2026-08-17 16:52:13] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1933682, KV size: 12.45 GB
[2026-08-17 16:52:13] Linear attention kernel backend: decode=triton, prefill=triton, verify=triton
[2026-08-17 16:52:13] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2], avail mem=73.10 GB
Capturing batches (bs=1 avail_mem=72.47 GB): 100%|██████████| 2/2 [00:02<00:00,  1.10s/it]
[2026-08-17 16:52:18] Capture target decode CUDA graph end. elapsed=2.58 s, mem usage=0.45 GB, avail mem=72.65 GB.
[2026-08-17 16:52:18] INFO:     Started server process [1963736]
[2026-08-17 16:52:18] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2026-08-17 16:52:41] INFO:     127.0.0.1:37664 - "POST /generate HTTP/1.1" 200 OK
[2026-08-17 16:52:41] The server is fired up and ready to roll!
"""

# SGLang 2026 with speculative decoding (an energy-benchmark test's captured boot log, 2026-07): several capture
# sets one after the other are one graph phase; their `elapsed=` add up.
SGLANG_CAPTURE_SETS = """\
[2026-07-21 08:21:50 TP0] Memory pool end. avail mem=7.80 GB
[2026-07-21 08:21:55 TP0] Capture target verify CUDA graph begin. backend=full, num_tokens_per_bs=6, bs=[1, 2, 3, 4, 5, 6], avail mem=7.77 GB
[2026-07-21 08:22:00 TP0] Capture target verify CUDA graph end. elapsed=4.56 s, mem usage=0.38 GB, avail mem=7.39 GB.
[2026-07-21 08:22:00 TP0] Capture draft decode CUDA graph begin. backend=full, num_tokens_per_bs=1, bs=[1, 2, 3, 4, 5, 6], avail mem=7.39 GB
[2026-07-21 08:22:01 TP0] Capture draft decode CUDA graph end. elapsed=1.56 s, mem usage=0.38 GB, avail mem=7.01 GB.
[2026-07-21 08:22:01 TP0] Capture draft extend CUDA graph begin. backend=full, num_tokens_per_bs=6, bs=[1, 2, 3, 4, 5, 6], avail mem=7.01 GB
[2026-07-21 08:22:02 TP0] Capture draft extend CUDA graph end. elapsed=0.74 s, mem usage=0.14 GB, avail mem=6.87 GB.
"""

# vLLM 0.20 with --enforce-eager (a user's docker compose log, 2026-05; the viewer's receive times, UTC+2, kept as
# the caller's receive times): no torch.compile and no graph capture, so both phases are skipped.
VLLM_0_20_EAGER = [
    (
        "2026-05-01 17:08:28.173",
        "(EngineCore pid=187) INFO 05-01 17:08:28 [core.py:109] Initializing a V1 LLM engine (v0.20.0) with config: model='sakamakismile/Qwen3.6-27B-Text-NVFP4-MTP', enforce_eager=True",
    ),
    (
        "2026-05-01 17:08:31.587",
        "(EngineCore pid=187) INFO 05-01 17:08:31 [parallel_state.py:1402] world_size=1 rank=0 local_rank=0 distributed_init_method=tcp://172.18.0.2:59169 backend=nccl",
    ),
    (
        "2026-05-01 17:08:31.839",
        "(EngineCore pid=187) INFO 05-01 17:08:31 [parallel_state.py:1715] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0, EP rank N/A, EPLB rank N/A",
    ),
    (
        "2026-05-01 17:08:32.486",
        "(EngineCore pid=187) INFO 05-01 17:08:32 [gpu_model_runner.py:4777] Starting to load model sakamakismile/Qwen3.6-27B-Text-NVFP4-MTP...",
    ),
    ("2026-05-01 17:08:34.712", "Loading safetensors checkpoint shards:   0% Completed | 0/1 [00:00<?, ?it/s]"),
    ("2026-05-01 17:08:52.245", "Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:17<00:00, 17.53s/it]"),
    (
        "2026-05-01 17:08:53.050",
        "(EngineCore pid=187) INFO 05-01 17:08:53 [default_loader.py:384] Loading weights took 18.35 seconds",
    ),
    (
        "2026-05-01 17:08:53.839",
        "(EngineCore pid=187) INFO 05-01 17:08:53 [gpu_model_runner.py:4879] Model loading took 17.62 GiB memory and 20.695716 seconds",
    ),
    (
        "2026-05-01 17:09:48.200",
        "(EngineCore pid=187) INFO 05-01 17:09:48 [gpu_worker.py:440] Available KV cache memory: 6.67 GiB",
    ),
    (
        "2026-05-01 17:09:48.201",
        "(EngineCore pid=187) INFO 05-01 17:09:48 [kv_cache_utils.py:1711] GPU KV cache size: 53,312 tokens",
    ),
    (
        "2026-05-01 17:09:48.201",
        "(EngineCore pid=187) INFO 05-01 17:09:48 [kv_cache_utils.py:1716] Maximum concurrency for 32,768 tokens per request: 5.15x",
    ),
    (
        "2026-05-01 17:09:50.893",
        "(EngineCore pid=187) INFO 05-01 17:09:50 [core.py:306] init engine (profile, create kv cache, warmup model) took 57.05 s",
    ),
    (
        "2026-05-01 17:09:51.189",
        "(APIServer pid=1) INFO 05-01 17:09:51 [api_server.py:598] Supported tasks: ['generate']",
    ),
    (
        "2026-05-01 17:09:55.825",
        "(APIServer pid=1) INFO 05-01 17:09:55 [api_server.py:602] Starting vLLM server on http://0.0.0.0:8000",
    ),
    ("2026-05-01 17:09:55.921", "(APIServer pid=1) INFO:     Started server process [1]"),
    ("2026-05-01 17:09:55.921", "(APIServer pid=1) INFO:     Waiting for application startup."),
    ("2026-05-01 17:09:56.179", "(APIServer pid=1) INFO:     Application startup complete."),
    ("2026-05-01 17:15:06.687", '(APIServer pid=1) INFO:     172.18.0.1:48308 - "GET /v1/models HTTP/1.1" 200 OK'),
]

# vLLM V1 in 2025-04 with torch.compile and graph capture (a GitHub issue's log, as quoted in an index of them).
VLLM_2025_COMPILED = """\
INFO 04-09 02:05:52 [loader.py:447] Loading weights took 33.15 seconds
INFO 04-09 02:05:53 [gpu_model_runner.py:1273] Model loading took 61.0374 GiB and 33.525153 seconds
INFO 04-09 02:06:09 [backends.py:416] Using cache directory: /root/.cache/vllm/torch_compile_cache/e8c79b34a0/rank_0_0 for vLLM's torch.compile
INFO 04-09 02:06:09 [backends.py:426] Dynamo bytecode transform time: 16.61 s
INFO 04-09 02:06:10 [backends.py:115] Directly load the compiled graph for shape None from the cache
INFO 04-09 02:06:25 [monitor.py:33] torch.compile takes 16.61 s in total
INFO 04-09 02:06:28 [kv_cache_utils.py:578] GPU KV cache size: 16,064 tokens
INFO 04-09 02:06:28 [kv_cache_utils.py:581] Maximum concurrency for 10,000 tokens per request: 1.61x
INFO 04-09 02:07:01 [gpu_model_runner.py:1608] Graph capturing finished in 33 secs, took 3.17 GiB
INFO 04-09 02:07:01 [core.py:162] init engine (profile, create kv cache, warmup model) took 68.69 seconds
"""
