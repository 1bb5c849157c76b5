"""Lookup tables are not differentiable: the ops TensorFlow's lookup_ops.py marks
NotDifferentiable (the tables, their initializers, Find, Insert and Size) pass no gradient.
Remove, Export and Import have no registration in TensorFlow either way; tfg leaves them
unregistered too, so a gradient asked through them is refused by name.
"""
from tfg.passes.grad.registry import no_gradient

no_gradient("HashTableV2", "MutableHashTableV2", "MutableHashTableOfTensorsV2",
            "InitializeTableV2", "InitializeTableFromTextFileV2", "LookupTableFindV2",
            "LookupTableInsertV2", "LookupTableSizeV2")
