"""Everything that talks to a node from this machine; reads plan data, declares no Pulumi resource.

- ssh (OpenSSH, pinned keys, the head as jump host) and runner (the one way to run a script on a node, and scan
  its host key); key_files: the operator's key files;
- observe: what every node runs now, at each program run; pulumi_process: the pulumi CLI a program runs under;
- readiness: what the readiness gate waits on; gate_probe: its probe of rank 0 (and when a start is wedged);
  after_answer: the gate after rank 0's first answer (a canary unanswered, the start's probation); gate_failures:
  why a start failed, in words, with every node's lines; start_watch: each node's start as the gate sees it; canary,
  fabric_proof, host_record: what the gate records at a start that served; history: the head's history of starts.
"""
