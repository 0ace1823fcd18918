/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 */

#ifndef BTL_USNIC_MAP_H
#define BTL_USNIC_MAP_H

#include "btl_usnic.h"

BEGIN_C_DECLS

/* (Re)write this process's connectivity map file, if one was asked for. */
void opal_btl_usnic_write_connectivity_map(void);

END_C_DECLS
#endif /* BTL_USNIC_MAP_H */
