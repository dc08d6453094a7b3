/* The common case of Summarizer._scan's per-entry loop (summarize.py), in C.
 *
 *   step(ctx, start, has_states, last_record_id) -> (next, has_states, last_record_id)
 *
 * ctx = (entries, with_frames, pg_cache, this_file, per_pg, runs, state_codes, memo, site_cache, by_site):
 * the list being scanned, the loop's own dicts (summarize.py builds them) and an empty dict that is this
 * module's memo for the scan (see lookup_site).
 *
 * From entries[start] on, an entry is handled here only when it is what the Python loop's fast path handles:
 * an exact dict holding every field, each of exactly the expected type, its group already named (pg_cache),
 * its call site already known (site_cache, or no frames), its sizes and dtypes equal to one of the
 * candidates seen at that (op, call site, group kind), not p2p, not a coalesced part, its record id
 * increasing. Every check comes before any change; the only change made before an entry is known to be
 * handled is the one the Python loop makes at that point whatever follows (an unseen (op, frames, group)
 * is entered into this_file and by_site as the loop enters it). At the first entry that is anything else
 * (or on any error) this returns that entry's index, and the Python loop handles it with its general code:
 * the semantics are the loop's (tests/analyzer/test_fastscan.py compares the two, field for field).
 *
 * Hostile input: the keys hashed here are made of exact str, exact int, tuples of those, and call sites the
 * Python loop made (checked); sizes and dtypes are only compared (==) with candidates that were type-checked
 * when they became candidates, so a comparison goes no deeper than those (two levels); no recursion beyond
 * that; no Python code runs (a decoded dump holds builtins only).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum {
    F_PG, F_PG_ID, F_OP, F_ISZ, F_IDT, F_OSZ, F_ODT, F_STATE, F_RECORD_ID, F_IS_P2P, F_SEQ, F_FRAMES, N_FIELDS
};

static const char *const FIELD_NAMES[N_FIELDS] = {
    "process_group", "pg_id", "profiling_name", "input_sizes", "input_dtypes", "output_sizes",
    "output_dtypes", "state", "record_id", "is_p2p", "collective_seq_id", "frames",
};

typedef struct {
    PyObject *names[N_FIELDS]; /* the field names, interned */
    PyObject *created_key;     /* "time_created_ns" */
    PyObject *detail_keys[5];  /* record_id, time_created_ns, ..._started_ns, ..._completed_ns, retired */
} module_state;

static module_state *
get_state_of(PyObject *module)
{
    return (module_state *)PyModule_GetState(module);
}

/* One call's view of ctx (borrowed: the ctx tuple holds them). */
typedef struct {
    PyObject *entries, *pg_cache, *this_file, *per_pg, *runs, *state_codes, *memo, *site_cache, *by_site;
    int with_frames;
    PyObject *keys[N_FIELDS]; /* the names as this dump's own key objects (equal strings: found faster) */
} scan;

/* ---- comparing an entry's sizes and dtypes with a candidate's ------------------------------------------ */

/* ``a == b`` for two items of a shape or a dtype list: exact ints by value, exact strs by content, else
 * Python's comparison. 1 equal, 0 not, -1 an error. */
static int
scalar_equal(PyObject *a, PyObject *b)
{
    if (a == b) {
        return 1;
    }
    if (PyLong_CheckExact(a) && PyLong_CheckExact(b)) {
        int oa = 0, ob = 0;
        long long x = PyLong_AsLongLongAndOverflow(a, &oa);
        long long y = PyLong_AsLongLongAndOverflow(b, &ob);
        if (!oa && !ob && !PyErr_Occurred()) {
            return x == y;
        }
        PyErr_Clear(); /* beyond int64: Python compares them */
    }
    else if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b)) {
        if (PyUnicode_GET_LENGTH(a) != PyUnicode_GET_LENGTH(b) || PyUnicode_KIND(a) != PyUnicode_KIND(b)) {
            return 0; /* canonical strings of equal content have the same length and kind */
        }
        return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b),
                      (size_t)PyUnicode_GET_LENGTH(a) * PyUnicode_KIND(a)) == 0;
    }
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

/* ``a == b`` where ``a`` is a candidate's field (type-checked when it became one), answered as Python's
 * ``==`` answers it: two exact lists (or two exact tuples) by length, then item by item, two levels down;
 * anything else by scalar_equal. 1 equal, 0 not, -1 an error. */
static int
equal(PyObject *a, PyObject *b, int depth)
{
    if (a == b) {
        return 1;
    }
    if (depth < 2 && Py_TYPE(a) == Py_TYPE(b) && (PyList_CheckExact(a) || PyTuple_CheckExact(a))) {
        Py_ssize_t n = Py_SIZE(a);
        if (Py_SIZE(b) != n) {
            return 0;
        }
        PyObject **ia = PyList_CheckExact(a) ? ((PyListObject *)a)->ob_item : ((PyTupleObject *)a)->ob_item;
        PyObject **ib = PyList_CheckExact(b) ? ((PyListObject *)b)->ob_item : ((PyTupleObject *)b)->ob_item;
        for (Py_ssize_t k = 0; k < n; k++) {
            int same = equal(ia[k], ib[k], depth + 1);
            if (same != 1) {
                return same;
            }
        }
        return 1;
    }
    return scalar_equal(a, b);
}

/* ---- the entry's group and call site --------------------------------------------------------------------- */

/* tuple(map(id, frames)): summarize.py's fkey (frames an exact list, or NULL for none). */
static PyObject *
frame_ids(PyObject *frames)
{
    Py_ssize_t n = frames == NULL ? 0 : PyList_GET_SIZE(frames);
    PyObject *fkey = PyTuple_New(n);
    if (fkey == NULL) {
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *id = PyLong_FromVoidPtr(PyList_GET_ITEM(frames, k));
        if (id == NULL) {
            Py_DECREF(fkey);
            return NULL;
        }
        PyTuple_SET_ITEM(fkey, k, id);
    }
    return fkey;
}

/* this_file[(op, fkey, pgk)] as a new reference, entered as the Python loop enters it when it is missing and
 * the call site is known (site_cache[fkey], or () without frames). NULL without an error: the call site is
 * not known yet (Python makes it). */
static PyObject *
site_of(scan *s, PyObject *op, PyObject *fkey, PyObject *pgk, PyObject *pg)
{
    PyObject *key = PyTuple_Pack(3, op, fkey, pgk);
    if (key == NULL) {
        return NULL;
    }
    PyObject *here = PyDict_GetItemWithError(s->this_file, key);
    if (here != NULL || PyErr_Occurred()) {
        Py_XINCREF(here);
        Py_DECREF(key);
        return here;
    }
    /* as summarize.py: site = site_cache[fkey] if fkey else (); kind = pg[1];
     * here = this_file[key] = (site, by_site.setdefault((op, site, kind), [])) */
    PyObject *site = PyTuple_GET_SIZE(fkey) ? PyDict_GetItemWithError(s->site_cache, fkey) : fkey;
    if (site == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    Py_INCREF(site);
    PyObject *bkey = PyTuple_Pack(3, op, site, PyTuple_GET_ITEM(pg, 1));
    PyObject *seen = bkey == NULL ? NULL : PyDict_GetItemWithError(s->by_site, bkey);
    if (seen != NULL) {
        Py_INCREF(seen);
    }
    else if (bkey != NULL && !PyErr_Occurred()) {
        seen = PyList_New(0);
        if (seen != NULL && PyDict_SetItem(s->by_site, bkey, seen) < 0) {
            Py_CLEAR(seen);
        }
    }
    here = seen == NULL ? NULL : PyTuple_Pack(2, site, seen);
    if (here != NULL && PyDict_SetItem(s->this_file, key, here) < 0) {
        Py_CLEAR(here);
    }
    Py_XDECREF(seen);
    Py_XDECREF(bkey);
    Py_DECREF(site);
    Py_DECREF(key);
    return here;
}

/* The group's name (pg_cache[(pg_id, pg)]) and ``here`` (this_file[(op, ids of the frames, (pg_id, pg))]), as
 * new references: 1 when both are known, 0 when not (Python makes them), -1 on an error.
 *
 * ``memo`` (this scan's, private to this module) maps the identities of op, the group's two strings and the
 * frames, and pg_id's value (or identity), to what those lookups gave: the objects stay alive (the entries
 * hold them) and neither dict ever replaces a value, so an entry made of the same objects finds the same.
 * The memo's key costs one allocation, where the loop's key costs an int for every frame and three tuples. */
static int
lookup_site(scan *s, PyObject *op, PyObject *pg_id, PyObject *pg, PyObject *frames, PyObject **pg_name,
            PyObject **here)
{
    Py_ssize_t nframes = 0;
    if (frames == Py_None) {
        frames = NULL;
    }
    if (frames != NULL) {
        if (!PyList_CheckExact(frames)) {
            return 0; /* frames of another type: Python checks them */
        }
        nframes = PyList_GET_SIZE(frames);
        if (nframes == 0) {
            frames = NULL;
        }
    }
    if (nframes > (PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(uintptr_t)) - 8) {
        return 0;
    }
    /* the memo's key: op, pg_id (kind, then value or identity), the group's strings, the frames' count and ids */
    PyObject *mkey = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(uintptr_t) * (6 + nframes));
    if (mkey == NULL) {
        return -1;
    }
    uintptr_t *words = (uintptr_t *)PyBytes_AS_STRING(mkey);
    words[0] = (uintptr_t)op;
    if (PyLong_CheckExact(pg_id)) {
        int overflow = 0;
        long long id = PyLong_AsLongLongAndOverflow(pg_id, &overflow);
        if (overflow || (id == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            Py_DECREF(mkey);
            return 0; /* Python refuses it */
        }
        words[1] = 1;
        words[2] = (uintptr_t)id;
    }
    else {
        words[1] = 2;
        words[2] = (uintptr_t)pg_id;
    }
    words[3] = (uintptr_t)PyTuple_GET_ITEM(pg, 0);
    words[4] = (uintptr_t)PyTuple_GET_ITEM(pg, 1);
    words[5] = (uintptr_t)nframes;
    for (Py_ssize_t k = 0; k < nframes; k++) {
        words[6 + k] = (uintptr_t)PyList_GET_ITEM(frames, k);
    }
    PyObject *known = PyDict_GetItemWithError(s->memo, mkey);
    if (known != NULL) {
        *pg_name = Py_NewRef(PyTuple_GET_ITEM(known, 0)); /* a pair this module made */
        *here = Py_NewRef(PyTuple_GET_ITEM(known, 1));
        Py_DECREF(mkey);
        return 1;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(mkey);
        return -1;
    }
    int result = 0;
    PyObject *fkey = NULL, *name = NULL, *site = NULL;
    PyObject *pgk = PyTuple_Pack(2, pg_id, pg);
    if (pgk == NULL) {
        result = -1;
        goto done;
    }
    name = PyDict_GetItemWithError(s->pg_cache, pgk); /* a str made by summarize.py */
    if (name == NULL || !PyUnicode_CheckExact(name)) {
        name = NULL;
        result = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    Py_INCREF(name);
    fkey = frame_ids(frames);
    if (fkey == NULL) {
        result = -1;
        goto done;
    }
    site = site_of(s, op, fkey, pgk, pg);
    if (site == NULL) {
        result = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    if (!PyTuple_CheckExact(site) || PyTuple_GET_SIZE(site) != 2 || !PyList_CheckExact(PyTuple_GET_ITEM(site, 1))) {
        goto done; /* not what summarize.py enters: let it meet it */
    }
    PyObject *pair = PyTuple_Pack(2, name, site);
    if (pair == NULL || PyDict_SetItem(s->memo, mkey, pair) < 0) {
        Py_XDECREF(pair);
        result = -1;
        goto done;
    }
    Py_DECREF(pair);
    *pg_name = name;
    *here = site;
    name = site = NULL;
    result = 1;
done:
    Py_XDECREF(site);
    Py_XDECREF(name);
    Py_XDECREF(fkey);
    Py_XDECREF(pgk);
    Py_DECREF(mkey);
    return result;
}

/* ---- one entry ----------------------------------------------------------------------------------------- */

/* What one handled entry adds, decided before anything is changed. */
typedef struct {
    PyObject *cols; /* the group's 6 columns (borrowed from per_pg) */
    PyObject *cand; /* the matching candidate (a new reference): sig, varying, n_in, n_out */
    PyObject *seq;  /* the entry's collective_seq_id (a new reference) */
    long long record_id;
    int state;
} verdict;

/* The candidate of ``seen`` equal to the entry's four fields (a new reference), or NULL (with an error set
 * on an error): the first, as the Python loop takes it. */
static PyObject *
find_candidate(PyObject *seen, PyObject *const *fields4)
{
    for (Py_ssize_t c = 0; c < PyList_GET_SIZE(seen); c++) {
        PyObject *cand = PyList_GET_ITEM(seen, c);
        if (!PyTuple_CheckExact(cand) || PyTuple_GET_SIZE(cand) != 8) {
            return NULL; /* not what summarize.py enters: let it meet it */
        }
        Py_INCREF(cand);
        int same = 1;
        for (int f = 0; f < 4 && same == 1; f++) {
            same = equal(PyTuple_GET_ITEM(cand, f), fields4[f], 0); /* cand[f] == field, as Python has it */
        }
        if (same == 1) {
            return cand;
        }
        Py_DECREF(cand);
        if (same < 0) {
            return NULL;
        }
    }
    return NULL;
}

/* 1: entry ``e`` is the common case (``out`` filled, with new references); 0: not (Python handles it);
 * -1: an error (set). */
static int
check_entry(scan *s, PyObject *e, long long last_record_id, verdict *out)
{
    PyObject *v[N_FIELDS] = {NULL};
    PyObject *pg_name = NULL, *here = NULL, *match = NULL;
    int result = 0;
    int n = s->with_frames ? N_FIELDS : F_FRAMES;

    if (!PyDict_CheckExact(e)) {
        return 0;
    }
    for (int k = 0; k < n; k++) {
        PyObject *x = PyDict_GetItemWithError(e, s->keys[k]);
        if (x == NULL) {
            result = PyErr_Occurred() ? -1 : 0;
            goto done;
        }
        v[k] = Py_NewRef(x);
    }
    PyObject *pg = v[F_PG], *pg_id = v[F_PG_ID], *op = v[F_OP];
    PyObject *state_name = v[F_STATE], *rid = v[F_RECORD_ID], *seq = v[F_SEQ];
    if (!PyTuple_CheckExact(pg) || PyTuple_GET_SIZE(pg) != 2 || !PyUnicode_CheckExact(PyTuple_GET_ITEM(pg, 0))
        || !PyUnicode_CheckExact(PyTuple_GET_ITEM(pg, 1)) || !(PyLong_CheckExact(pg_id) || PyUnicode_CheckExact(pg_id))
        || !PyUnicode_CheckExact(op) || !PyUnicode_CheckExact(state_name) || !PyLong_CheckExact(rid)
        || v[F_IS_P2P] != Py_False || !PyLong_CheckExact(seq)) {
        goto done;
    }
    int overflow = 0;
    long long record_id = PyLong_AsLongLongAndOverflow(rid, &overflow);
    if (overflow || (record_id == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        goto done; /* beyond int64: Python keeps it */
    }
    if (record_id <= last_record_id && record_id >= 0) {
        goto done; /* out of order: Python names it */
    }
    result = lookup_site(s, op, pg_id, pg, s->with_frames ? v[F_FRAMES] : NULL, &pg_name, &here);
    if (result != 1) {
        goto done;
    }
    result = 0;
    match = find_candidate(PyTuple_GET_ITEM(here, 1), &v[F_ISZ]);
    if (match == NULL) {
        result = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    PyObject *cols = PyDict_GetItemWithError(s->per_pg, pg_name);
    if (cols == NULL) {
        result = PyErr_Occurred() ? -1 : 0;
        goto done; /* a new group: Python adds its columns */
    }
    if (!PyTuple_CheckExact(cols) || PyTuple_GET_SIZE(cols) != 6) {
        goto done;
    }
    for (int k = 0; k < 6; k++) {
        if (!PyList_CheckExact(PyTuple_GET_ITEM(cols, k))) {
            goto done;
        }
    }
    PyObject *seqs = PyTuple_GET_ITEM(cols, 0);
    Py_ssize_t held = PyList_GET_SIZE(seqs);
    if (held > 0) {
        int same = scalar_equal(PyList_GET_ITEM(seqs, held - 1), seq);
        if (same != 0) { /* a coalesced part (or an error): Python chains it */
            result = same < 0 ? -1 : 0;
            goto done;
        }
    }
    if (PyDict_GET_SIZE(s->runs) > 0) {
        int open = PyDict_Contains(s->runs, pg_name);
        if (open != 0) { /* the group's coalesced region closes here: Python closes it */
            result = open < 0 ? -1 : 0;
            goto done;
        }
    }
    long state = -1;
    PyObject *code = PyDict_GetItemWithError(s->state_codes, state_name);
    if (code != NULL) {
        state = PyLong_AsLong(code);
        if (state == -1 && PyErr_Occurred()) {
            result = -1;
            goto done;
        }
    }
    else if (PyErr_Occurred()) {
        result = -1;
        goto done;
    }
    out->cols = cols;
    out->cand = match;
    out->seq = Py_NewRef(seq);
    out->record_id = record_id;
    out->state = (int)state;
    match = NULL;
    result = 1;
done:
    Py_XDECREF(match);
    Py_XDECREF(pg_name);
    Py_XDECREF(here);
    for (int k = 0; k < N_FIELDS; k++) {
        Py_XDECREF(v[k]);
    }
    return result;
}

/* Appends the entry as the Python loop does. 0, or -1 on an error. */
static int
commit(PyObject *e, verdict *d)
{
    PyObject *cand = d->cand, *cols = d->cols;
    int vary = PyObject_IsTrue(PyTuple_GET_ITEM(cand, 5));
    if (vary < 0) {
        return -1;
    }
    if (vary
        && (PyList_Append(PyTuple_GET_ITEM(cols, 3), d->seq) < 0
            || PyList_Append(PyTuple_GET_ITEM(cols, 4), PyTuple_GET_ITEM(cand, 6)) < 0
            || PyList_Append(PyTuple_GET_ITEM(cols, 5), PyTuple_GET_ITEM(cand, 7)) < 0)) {
        return -1;
    }
    if (PyList_Append(PyTuple_GET_ITEM(cols, 0), d->seq) < 0
        || PyList_Append(PyTuple_GET_ITEM(cols, 1), PyTuple_GET_ITEM(cand, 4)) < 0
        || PyList_Append(PyTuple_GET_ITEM(cols, 2), e) < 0) {
        return -1;
    }
    return 0;
}

/* ---- the loop ------------------------------------------------------------------------------------------ */

/* s->keys: the field names as the dump spells them (its first dict entry's own key objects, kept in the memo
 * under None for the scan), else the interned names. Only a speed-up: equal strings find the same value. */
static int
learn_keys(module_state *st, scan *s, PyObject *first)
{
    PyObject *known = PyDict_GetItemWithError(s->memo, Py_None);
    if (known == NULL && PyErr_Occurred()) {
        return -1;
    }
    if (known == NULL) {
        known = PyTuple_New(N_FIELDS);
        if (known == NULL) {
            return -1;
        }
        for (int k = 0; k < N_FIELDS; k++) {
            PyTuple_SET_ITEM(known, k, Py_NewRef(st->names[k]));
        }
        if (PyDict_CheckExact(first)) {
            Py_ssize_t pos = 0;
            PyObject *key, *value;
            while (PyDict_Next(first, &pos, &key, &value)) {
                if (!PyUnicode_CheckExact(key)) {
                    continue;
                }
                for (int k = 0; k < N_FIELDS; k++) {
                    if (scalar_equal(st->names[k], key) == 1) {
                        Py_SETREF(((PyTupleObject *)known)->ob_item[k], Py_NewRef(key));
                        break;
                    }
                }
            }
        }
        int failed = PyDict_SetItem(s->memo, Py_None, known);
        Py_DECREF(known);
        if (failed < 0) {
            return -1;
        }
    }
    if (!PyTuple_CheckExact(known) || PyTuple_GET_SIZE(known) != N_FIELDS) {
        PyErr_SetString(PyExc_SystemError, "_fastscan: the memo's keys are not a tuple of the fields");
        return -1;
    }
    for (int k = 0; k < N_FIELDS; k++) {
        s->keys[k] = PyTuple_GET_ITEM(known, k); /* borrowed: the memo holds them for the scan */
    }
    return 0;
}

static PyObject *
step(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "step(ctx, start, has_states, last_record_id)");
        return NULL;
    }
    PyObject *ctx = args[0];
    if (!PyTuple_CheckExact(ctx) || PyTuple_GET_SIZE(ctx) != 10 || !PyList_CheckExact(PyTuple_GET_ITEM(ctx, 0))) {
        PyErr_SetString(PyExc_TypeError, "ctx: (entries, with_frames, pg_cache, this_file, per_pg, runs, "
                                         "state_codes, memo, site_cache, by_site)");
        return NULL;
    }
    for (int k = 2; k < 10; k++) {
        if (!PyDict_CheckExact(PyTuple_GET_ITEM(ctx, k))) {
            PyErr_SetString(PyExc_TypeError, "ctx: items 2 to 9 must be dicts");
            return NULL;
        }
    }
    scan s;
    PyObject **items = ((PyTupleObject *)ctx)->ob_item;
    s.entries = items[0];
    s.pg_cache = items[2];
    s.this_file = items[3];
    s.per_pg = items[4];
    s.runs = items[5];
    s.state_codes = items[6];
    s.memo = items[7];
    s.site_cache = items[8];
    s.by_site = items[9];
    s.with_frames = PyObject_IsTrue(items[1]);
    if (s.with_frames < 0) {
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    if (i == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (i < 0) {
        PyErr_SetString(PyExc_ValueError, "step: start < 0");
        return NULL;
    }
    int has_states = PyObject_IsTrue(args[2]);
    if (has_states < 0) {
        return NULL;
    }
    PyObject *last_in = args[3];
    if (!PyLong_CheckExact(last_in)) {
        PyErr_SetString(PyExc_TypeError, "step: last_record_id must be an int");
        return NULL;
    }
    int overflow = 0;
    long long last = PyLong_AsLongLongAndOverflow(last_in, &overflow);
    if (last == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_INCREF(ctx); /* holds entries and the dicts for the call */
    int failed = 0, moved = 0;
    /* a last record id beyond int64 (Python keeps such a one): every entry goes to Python */
    if (!overflow && i < PyList_GET_SIZE(s.entries)) {
        failed = learn_keys(get_state_of(module), &s, PyList_GET_ITEM(s.entries, i)) < 0;
    }
    while (!failed && !overflow && i < PyList_GET_SIZE(s.entries)) {
        PyObject *e = Py_NewRef(PyList_GET_ITEM(s.entries, i));
        verdict d = {0};
        int ok = check_entry(&s, e, last, &d);
        if (ok == 1) {
            failed = commit(e, &d) < 0;
            Py_DECREF(d.seq);
            Py_DECREF(d.cand);
            Py_DECREF(e);
            if (failed) {
                break; /* an append failed: out of memory */
            }
            if (d.state > 0) {
                has_states = 1;
            }
            if (d.record_id > last) {
                last = d.record_id;
                moved = 1;
            }
            i++;
            continue;
        }
        Py_DECREF(e);
        if (ok < 0) {
            /* an error while checking (none is expected from builtins): Python reads the entry again and meets
             * it, or not, as its general code does */
            PyErr_Clear();
        }
        break;
    }
    Py_DECREF(ctx);
    if (failed) {
        return NULL;
    }
    PyObject *last_out = moved ? PyLong_FromLongLong(last) : Py_NewRef(last_in);
    if (last_out == NULL) {
        return NULL;
    }
    return Py_BuildValue("(nON)", i, has_states ? Py_True : Py_False, last_out);
}

/* ---- creation times ------------------------------------------------------------------------------------ */

/* created(ents) -> bytes | None: each entry's ``time_created_ns`` (0 when missing) as native int64s, when
 * every entry is an exact dict and every time an exact int within int64; else None (summarize._created reads
 * them with its general code). */
static PyObject *
created(PyObject *module, PyObject *ents)
{
    if (!PyList_CheckExact(ents)) {
        PyErr_SetString(PyExc_TypeError, "created(ents): a list");
        return NULL;
    }
    module_state *st = get_state_of(module);
    Py_INCREF(ents);
    Py_ssize_t n = PyList_GET_SIZE(ents);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL) {
        Py_DECREF(ents);
        return NULL;
    }
    int64_t *times = (int64_t *)PyBytes_AS_STRING(out);
    PyObject *key = st->created_key;
    for (Py_ssize_t k = 0; k < n && k < PyList_GET_SIZE(ents); k++) {
        PyObject *e = PyList_GET_ITEM(ents, k);
        if (!PyDict_CheckExact(e)) {
            goto general;
        }
        PyObject *t = PyDict_GetItemWithError(e, key);
        if (t == NULL) {
            if (PyErr_Occurred()) {
                PyErr_Clear();
                goto general;
            }
            times[k] = 0;
            continue;
        }
        if (!PyLong_CheckExact(t)) {
            goto general;
        }
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(t, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            goto general;
        }
        times[k] = (int64_t)v;
    }
    if (PyList_GET_SIZE(ents) != n) {
        goto general;
    }
    Py_DECREF(ents);
    return out;
general:
    Py_DECREF(out);
    Py_DECREF(ents);
    Py_RETURN_NONE;
}

/* ---- a kept entry's detail ------------------------------------------------------------------------------ */

/* *out = the int64 value of ``e[key]`` (``dflt`` when missing or None): 1; 0 when it is anything else (an int
 * beyond int64, a bool, a float, a string: summarize._as_int reads those); -1 on an error. */
static int
plain_int(PyObject *e, PyObject *key, long long dflt, long long *out)
{
    PyObject *v = PyDict_GetItemWithError(e, key);
    if (v == NULL || v == Py_None) {
        *out = dflt;
        return PyErr_Occurred() ? -1 : 1;
    }
    if (!PyLong_CheckExact(v)) {
        return 0;
    }
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (*out == -1 && PyErr_Occurred()) {
        return -1;
    }
    return !overflow;
}

/* detail(e, state_codes) -> (record_id, state, retired, created_ns, started_ns, completed_ns) | None: what
 * summarize._tail_entry reads from a kept entry, when every value is plain (an int64 or missing/None, a
 * str or missing state, a bool or missing retired); else None (Python reads it). */
static PyObject *
detail(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_CheckExact(args[0]) || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "detail(entry: dict, state_codes: dict)");
        return NULL;
    }
    module_state *st = get_state_of(module);
    PyObject *e = args[0];
    long long v[4];
    static const long long dflt[4] = {-1, 0, 0, 0};
    Py_INCREF(e);
    PyObject *result = NULL;
    for (int k = 0; k < 4; k++) {
        int ok = plain_int(e, st->detail_keys[k], dflt[k], &v[k]);
        if (ok < 0) {
            goto done;
        }
        if (ok == 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    long state = -1;
    PyObject *name = PyDict_GetItemWithError(e, st->names[F_STATE]);
    if (name == NULL && PyErr_Occurred()) {
        goto done;
    }
    if (name != NULL && PyUnicode_Check(name)) {
        if (!PyUnicode_CheckExact(name)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        PyObject *code = PyDict_GetItemWithError(args[1], name);
        if (code == NULL && PyErr_Occurred()) {
            goto done;
        }
        if (code != NULL) {
            state = PyLong_AsLong(code);
            if (state == -1 && PyErr_Occurred()) {
                goto done;
            }
        }
    }
    PyObject *retired = PyDict_GetItemWithError(e, st->detail_keys[4]);
    if (retired == NULL && PyErr_Occurred()) {
        goto done;
    }
    if (retired != Py_True && retired != Py_False) {
        retired = Py_None; /* not a bool: unknown */
    }
    result = Py_BuildValue("(LlOLLL)", v[0], state, retired, v[1], v[2], v[3]);
done:
    Py_DECREF(e);
    return result;
}

/* ---- the module ---------------------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"step", (PyCFunction)(void (*)(void))step, METH_FASTCALL,
     "step(ctx, start, has_states, last_record_id) -> (next, has_states, last_record_id)\n\n"
     "Handles entries from ``start`` on while they are the common case; returns at the first that is not."},
    {"detail", (PyCFunction)(void (*)(void))detail, METH_FASTCALL,
     "detail(entry, state_codes) -> (record_id, state, retired, created_ns, started_ns, completed_ns) | None\n\n"
     "A kept entry's detail when every value is plain; None when Python must read it."},
    {"created", (PyCFunction)created, METH_O,
     "created(ents) -> bytes | None\n\n"
     "Each entry's time_created_ns as native int64s, or None when one is not a plain int64 (or not a dict)."},
    {NULL, NULL, 0, NULL},
};

static int
exec_module(PyObject *module)
{
    module_state *st = get_state_of(module);
    for (int k = 0; k < N_FIELDS; k++) {
        st->names[k] = PyUnicode_InternFromString(FIELD_NAMES[k]);
        if (st->names[k] == NULL) {
            return -1;
        }
    }
    st->created_key = PyUnicode_InternFromString("time_created_ns");
    static const char *const detail_names[5] = {
        "record_id", "time_created_ns", "time_discovered_started_ns", "time_discovered_completed_ns", "retired",
    };
    for (int k = 0; k < 5; k++) {
        st->detail_keys[k] = PyUnicode_InternFromString(detail_names[k]);
        if (st->detail_keys[k] == NULL) {
            return -1;
        }
    }
    return st->created_key == NULL ? -1 : 0;
}

static int
traverse(PyObject *module, visitproc visit, void *arg)
{
    module_state *st = get_state_of(module);
    for (int k = 0; k < N_FIELDS; k++) {
        Py_VISIT(st->names[k]);
    }
    Py_VISIT(st->created_key);
    for (int k = 0; k < 5; k++) {
        Py_VISIT(st->detail_keys[k]);
    }
    return 0;
}

static int
clear(PyObject *module)
{
    module_state *st = get_state_of(module);
    for (int k = 0; k < N_FIELDS; k++) {
        Py_CLEAR(st->names[k]);
    }
    Py_CLEAR(st->created_key);
    for (int k = 0; k < 5; k++) {
        Py_CLEAR(st->detail_keys[k]);
    }
    return 0;
}

static void
free_module(void *module)
{
    clear((PyObject *)module);
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, exec_module},
    {0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "frwatch_analyzers.decode._fastscan",
    .m_doc = "The common case of Summarizer._scan's per-entry loop, in C (see summarize.py and fastscan.py).",
    .m_size = sizeof(module_state),
    .m_methods = methods,
    .m_slots = slots,
    .m_traverse = traverse,
    .m_clear = clear,
    .m_free = free_module,
};

PyMODINIT_FUNC
PyInit__fastscan(void)
{
    return PyModuleDef_Init(&moduledef);
}
