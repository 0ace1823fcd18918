/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 */

#ifndef BTL_USNIC_MAP_H
#define BTL_USNIC_MAP_H

#include "btl_usnic.h"

BEGIN_C_DECLS

/* (Re)write this process's connectivity map file, if one was asked for.
 * The file is replaced as a whole, never written through a symlink. */
void opal_btl_usnic_write_connectivity_map(void);

/* The map file's name: <prefix>-<host>.pid<pid>.job<jobid>.mcwrank<vpid>.txt;
 * false if it does not fit path. */
bool opal_btl_usnic_map_path(char *path, size_t size);

END_C_DECLS
#endif /* BTL_USNIC_MAP_H */
