"""The instruction set of tfg/kernels/program_loops.py's program loop, without numba: the
planner (tfg/executor/chain_programs.py) writes programs when a Session prepares its loops,
and a one-shot run never imports numba.

Each instruction is one row of WIDTH integers, the opcode first (program_loops.py says what
each does).
"""
(LOAD, LOADM, STORE, ADD, SUB, MUL, DIV, NEG, SIGMOID, TANH, SELECT, TANH_GRAD,
 SIGMOID_GRAD) = range(13)
WIDTH = 8  # integers per instruction
