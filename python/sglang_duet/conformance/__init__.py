"""What real clients send and what sglang-duet must answer (#24): the request cases
(`cases`) and SGLang's own test kits run against a URL (`kits`). Shared by the suite and
`benchmark.serving.clients`; no server is started here."""
