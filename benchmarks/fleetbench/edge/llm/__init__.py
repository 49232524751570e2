"""Edge LLM runtimes (llama.cpp, MLX) running the trainer's llama-family model: export, measure, agree."""
