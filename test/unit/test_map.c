/*
 * Copyright (c) 2026 The usnic BTL authors.  All rights reserved.
 * $COPYRIGHT$
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * The connectivity map file (btl_usnic_map.c): its name is predictable
 * and its directory may be shared (/tmp), so whatever sits at that name
 * (a symlink to someone's file, say) is replaced, never written through.
 */

#include "opal_config.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btl_usnic_map.h"

#include "engine_world.h"
#include "usnic_test.h"

static const char victim_text[] = "not the map\n";

/* The file's contents (at most size - 1 bytes), "" if unreadable. */
static const char *slurp(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW);
    ssize_t n = fd >= 0 ? read(fd, buf, size - 1) : -1;

    buf[n > 0 ? n : 0] = '\0';
    if (fd >= 0) {
        close(fd);
    }
    return buf;
}

static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    while (NULL != d && NULL != (e = readdir(d))) {
        n += '.' != e->d_name[0];
    }
    if (NULL != d) {
        closedir(d);
    }
    return n;
}

static int map_checks(const char *dir)
{
    char path[4096], victim[512], buf[4096];
    struct stat st;
    FILE *f;

    snprintf(victim, sizeof(victim), "%s/victim", dir);
    f = fopen(victim, "w");
    check(NULL != f);
    fputs(victim_text, f);
    fclose(f);
    check(opal_btl_usnic_map_path(path, sizeof(path)));
    check(0 == strncmp(path, dir, strlen(dir)));

    /* a symlink at the map's name: replaced, its target untouched */
    check(0 == symlink(victim, path));
    opal_btl_usnic_write_connectivity_map();
    check_str_eq(slurp(victim, buf, sizeof(buf)), victim_text);
    check(0 == lstat(path, &st));
    check(S_ISREG(st.st_mode));
    check_int_eq(st.st_mode & 07777, 0644);
    check(NULL != strstr(slurp(path, buf, sizeof(buf)),
                         "device=fakeA,interface=eth0,ip=10.0.0.1/24,"));
    check(NULL != strstr(buf, "peer=1,hostname=hostB,device=fakeA@peer_ip=10.0.0.2/24@"));
    check_int_eq(entries(dir), 2);

    /* our own earlier map: rewritten */
    check(0 == truncate(path, 0));
    opal_btl_usnic_write_connectivity_map();
    check(NULL != strstr(slurp(path, buf, sizeof(buf)), "device=fakeA,"));
    check_int_eq(entries(dir), 2);

    /* something that cannot be replaced: reported, nothing left behind */
    check(0 == unlink(path));
    check(0 == mkdir(path, 0700));
    opal_btl_usnic_write_connectivity_map();
    check(0 == lstat(path, &st));
    check(S_ISDIR(st.st_mode));
    check_int_eq(entries(dir), 2);
    check_str_eq(slurp(victim, buf, sizeof(buf)), victim_text);
    return 0;
}

USNIC_TEST(map_file_replaced_not_followed)
{
    char dir[] = "/tmp/usnic-map-test.XXXXXX", prefix[128], path[4096], victim[512];
    char *saved;
    world_t *w;
    int rc;

    check(NULL != mkdtemp(dir));
    w = world_new(1, 2);
    check(NULL != w);
    saved = usnic_component.connectivity_map_prefix;
    snprintf(prefix, sizeof(prefix), "%s/map", dir);
    usnic_component.connectivity_map_prefix = prefix;
    rc = map_checks(dir);

    if (opal_btl_usnic_map_path(path, sizeof(path))) {
        rmdir(path);
        unlink(path);
    }
    usnic_component.connectivity_map_prefix = saved;
    world_fini(w);
    snprintf(victim, sizeof(victim), "%s/victim", dir);
    unlink(victim);
    check(0 == rmdir(dir));
    return rc;
}
