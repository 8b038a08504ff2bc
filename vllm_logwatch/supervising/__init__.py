"""vLLM as a child process: its bytes to the launch file and our stdout, never blocking it; stopping it
well.
"""
