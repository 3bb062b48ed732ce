"""Step 1, partition: the graph into one part per worker.

``output`` finds and checks the partition set DGL wrote (its config and part folders);
``parmetis_modes`` runs the ParMETIS modes (the chunked graph checked where it lives, then
``mpirun`` with one rank per pod or per worker), whose command line, MPI hostfile and failure
line are ``mpirun``'s. The DGL-API mode's partition entry point is started by launcher.phases.
"""
