"""Router shapes several strategies share: cell map, term map, kd-tree, R-tree, subscription table, hash, dual."""
