"""How human is the simulated user: simulator fidelity against a human corpus of the same task
(``corpus``, ``features``, ``discriminator``, ``runner``), and how much an agent's score depends on
the simulator (``sensitivity``). See docs/fidelity.md."""
