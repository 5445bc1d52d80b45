"""What a job serves to this machine: web services (Jupyter, TensorBoard) and a
terminal on its node."""
