"""The DGLJob API, besides its CRD: one typed model that the operator's parser and builders
and the users' client share.

- :mod:`dgljob.names`: group, version, kind, replica types, the enumerated fields' values;
- :mod:`dgljob.modes`: what each ``spec.partitionMode`` means for the job's pods;
- :mod:`dgljob.model`: the dataclasses (``DGLJob``, ``JobSpec`` and its parts);
- :mod:`dgljob.parse`: the raw object to the model, every CRD rule checked again
  (``SpecError`` names the field);
- :mod:`dgljob.build`: a new job from typed values (``new_job``).

Standard library and :mod:`podcontract` only, so that both the operator (controller/) and the
client (dgl_operator/) import it.
"""
