# -*- shell-script -*-
#
# Build-time configuration of the usnic BTL (verbs UD queue pairs) for
# an Open MPI 4.1 or 5.0 source tree, where this directory is
# opal/mca/btl/usnic.  autogen.pl finds this file and configure runs
# MCA_opal_btl_usnic_CONFIG while it visits the btl framework.
#
# What the component needs:
#   - 64-bit Linux;
#   - libibverbs (on 4.1 found through OPAL_CHECK_OPENFABRICS, so the
#     usual --with-verbs / --with-verbs-libdir switches apply; 5.0 has
#     no verbs support of its own any more, so the component looks for
#     infiniband/verbs.h and -libverbs itself).
# Route lookups come from OPAL's reachable framework, so the component
# needs no netlink library of its own.
#
# Switches of its own:
#   --with-usnic     build it or stop configure with an error
#   --without-usnic  do not build it
#   (neither)        build it when the above is available
#
# Results: btl_usnic_CPPFLAGS, btl_usnic_LDFLAGS and btl_usnic_LIBS,
# and btl_usnic_opal_la (libopen-pal's libtool library: 4.1 names it
# lib@OPAL_LIB_PREFIX@open-pal.la, 5.0 lib@OPAL_LIB_NAME@.la),
# substituted into Makefile.am.
#
# $HEADER$
#
# SPDX-License-Identifier: BSD-3-Clause

# MCA_opal_btl_usnic_CONFIG([action-if-can-compile],
#                           [action-if-cant-compile])
# ---------------------------------------------------
AC_DEFUN([MCA_opal_btl_usnic_CONFIG],[
    AC_CONFIG_FILES([opal/mca/btl/usnic/Makefile])

    AC_ARG_WITH([usnic],
                [AS_HELP_STRING([--with-usnic],
                                [Build the usnic BTL (verbs UD queue pairs, needs libibverbs on 64-bit Linux); configure fails if it cannot be built.  --without-usnic skips it.  Default: build it when possible])])

    OPAL_VAR_SCOPE_PUSH([btl_usnic_happy btl_usnic_reason btl_usnic_save_CPPFLAGS btl_usnic_save_LDFLAGS btl_usnic_save_LIBS])

    btl_usnic_happy=yes
    btl_usnic_reason=

    AC_MSG_CHECKING([whether the usnic BTL is wanted])
    AS_CASE(["x$with_usnic"],
            [xno], [btl_usnic_happy=no
                    btl_usnic_reason="--without-usnic was given"
                    AC_MSG_RESULT([no (--without-usnic)])],
            [x],   [AC_MSG_RESULT([yes, if it can be built])],
            [xyes], [AC_MSG_RESULT([yes (--with-usnic: required)])],
            [AC_MSG_RESULT([yes (--with-usnic=$with_usnic: required)])])

    # --- 64-bit Linux only ---------------------------------------------
    AS_IF([test "$btl_usnic_happy" = "yes"],
          [AC_CHECK_SIZEOF([void *])
           AC_MSG_CHECKING([whether the usnic BTL supports this host ($host_os, ${ac_cv_sizeof_void_p}-byte pointers)])
           AS_CASE(["$host_os"],
                   [*linux*],
                   [AS_IF([test "$ac_cv_sizeof_void_p" != "8"],
                          [btl_usnic_happy=no
                           btl_usnic_reason="it needs a 64-bit build; pointers here are $ac_cv_sizeof_void_p bytes"])],
                   [btl_usnic_happy=no
                    btl_usnic_reason="it needs Linux; this host OS is $host_os"])
           AC_MSG_RESULT([$btl_usnic_happy])])

    # --- libibverbs ------------------------------------------------------
    m4_ifdef([OPAL_CHECK_OPENFABRICS],
        [AS_IF([test "$btl_usnic_happy" = "yes"],
               [OPAL_CHECK_OPENFABRICS([btl_usnic],
                                       [],
                                       [btl_usnic_happy=no
                                        AS_IF([test "$opal_want_verbs" = "no"],
                                              [btl_usnic_reason="it needs libibverbs, but --without-verbs was given"],
                                              [btl_usnic_reason="libibverbs (infiniband/verbs.h and -libverbs) was not found or is not usable"])])])],
        [AS_IF([test "$btl_usnic_happy" = "yes"],
               [AC_CHECK_HEADER([infiniband/verbs.h],
                                [AC_CHECK_LIB([ibverbs], [ibv_open_device],
                                              [btl_usnic_LIBS=-libverbs],
                                              [btl_usnic_happy=no])],
                                [btl_usnic_happy=no])
                AS_IF([test "$btl_usnic_happy" = "no"],
                      [btl_usnic_reason="libibverbs (infiniband/verbs.h and -libverbs) was not found or is not usable"])])])

    # --- declarations that differ between rdma-core releases ---------------
    # and a last check that the component's verbs calls link.
    AS_IF([test "$btl_usnic_happy" = "yes"],
          [btl_usnic_save_CPPFLAGS=$CPPFLAGS
           btl_usnic_save_LDFLAGS=$LDFLAGS
           btl_usnic_save_LIBS=$LIBS
           CPPFLAGS="$CPPFLAGS $btl_usnic_CPPFLAGS"
           LDFLAGS="$LDFLAGS $btl_usnic_LDFLAGS"
           LIBS="$btl_usnic_LIBS $LIBS"

           AC_CHECK_DECLS([IBV_EVENT_GID_CHANGE, ibv_event_type_str], [], [],
                          [[#include <infiniband/verbs.h>]])

           AC_MSG_CHECKING([whether the verbs calls of the usnic BTL link])
           AC_LINK_IFELSE([AC_LANG_PROGRAM([[
#include <infiniband/verbs.h>
]], [[
    struct ibv_gid_entry entry;
    struct ibv_device **devs = ibv_get_device_list((int *) 0);
    (void) ibv_query_gid_ex((struct ibv_context *) 0, 1, 0, &entry, 0);
    ibv_free_device_list(devs);
]])],
                          [AC_MSG_RESULT([yes])],
                          [AC_MSG_RESULT([no])
                           btl_usnic_happy=no
                           btl_usnic_reason="a test program using libibverbs (ibv_query_gid_ex needs rdma-core 32 or newer) did not link (see config.log)"])

           CPPFLAGS=$btl_usnic_save_CPPFLAGS
           LDFLAGS=$btl_usnic_save_LDFLAGS
           LIBS=$btl_usnic_save_LIBS])

    # --- verdict -----------------------------------------------------------
    AC_MSG_CHECKING([whether the usnic BTL can be built])
    AS_IF([test "$btl_usnic_happy" = "yes"],
          [AC_MSG_RESULT([yes])
           $1],
          [AC_MSG_RESULT([no: $btl_usnic_reason])
           AS_IF([test -n "$with_usnic" && test "$with_usnic" != "no"],
                 [AC_MSG_WARN([--with-usnic was given, but the usnic BTL cannot be built:])
                  AC_MSG_WARN([$btl_usnic_reason])
                  AC_MSG_ERROR([Cannot continue])],
                 [test "$with_usnic" != "no"],
                 [AC_MSG_WARN([the usnic BTL will not be built: $btl_usnic_reason])])
           btl_usnic_CPPFLAGS=
           btl_usnic_LDFLAGS=
           btl_usnic_LIBS=
           $2])

    OPAL_SUMMARY_ADD([[Transports]], [[usNIC over verbs UD]], [[btl_usnic]], [$btl_usnic_happy])

    AS_IF([test -n "$OPAL_LIB_NAME"],
          [btl_usnic_opal_la="lib$OPAL_LIB_NAME.la"],
          [btl_usnic_opal_la="lib${OPAL_LIB_PREFIX}open-pal.la"])
    AC_SUBST([btl_usnic_opal_la])

    AC_SUBST([btl_usnic_CPPFLAGS])
    AC_SUBST([btl_usnic_LDFLAGS])
    AC_SUBST([btl_usnic_LIBS])

    OPAL_VAR_SCOPE_POP
])dnl
