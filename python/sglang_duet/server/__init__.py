"""What sglang-duet adds around SGLang's HTTP server: request limits and checks, an orderly
SIGTERM drain, and a fast, clean end when a child process dies. SGLang itself is unchanged;
everything here is installed by `sglang_duet.launch_server` only (see README "Reliability")."""
