"""The simulator checked against real SGLang on this CPU (issue 22, item 6): see README.md."""
