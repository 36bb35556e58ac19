"""The v1 routes of DESIGN §7. Thin: each calls the kernel and shapes its answer."""
