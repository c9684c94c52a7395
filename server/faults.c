/* faults.c — parsing and printing of fault sets. */
#include "faults.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static const char *const route_names[] = {"all", "execute", "files", "orchestrator"};

static const char *routes_parse(enum fault_routes *r, const char *s)
{
	for (size_t i = 0; i < sizeof(route_names) / sizeof(route_names[0]); i++) {
		if (strcmp(s, route_names[i]) == 0) {
			*r = (enum fault_routes)i;
			return NULL;
		}
	}
	return "routes must be all, execute, files or orchestrator";
}

bool faults_any(const struct faults *f)
{
	return f->lose_answer || f->drop_before || f->error_rate > 0 || f->delay_ms > 0 ||
	       f->malformed_json || f->hostile_listing || f->truncate_answer ||
	       f->body_rate_kbps > 0 || f->create_lose_answer || f->hide_new_ms > 0 ||
	       f->refuse_chunked || f->drop_chunked_kb > 0;
}

const char *faults_from_json(struct faults *out, const cJSON *obj)
{
	struct faults f = {0};
	const cJSON *it;

	if (!cJSON_IsObject(obj))
		return "faults must be a JSON object";
	cJSON_ArrayForEach(it, obj)
	{
		const char *k = it->string;
		bool *flag = NULL;

		if (strcmp(k, "lose_answer") == 0)
			flag = &f.lose_answer;
		else if (strcmp(k, "drop_before") == 0)
			flag = &f.drop_before;
		else if (strcmp(k, "malformed_json") == 0)
			flag = &f.malformed_json;
		else if (strcmp(k, "hostile_listing") == 0)
			flag = &f.hostile_listing;
		else if (strcmp(k, "truncate_answer") == 0)
			flag = &f.truncate_answer;
		else if (strcmp(k, "create_lose_answer") == 0)
			flag = &f.create_lose_answer;
		else if (strcmp(k, "refuse_chunked") == 0)
			flag = &f.refuse_chunked;
		if (flag) {
			if (!cJSON_IsBool(it))
				return "fault switches must be booleans";
			*flag = cJSON_IsTrue(it);
		} else if (strcmp(k, "error_rate") == 0) {
			if (!cJSON_IsNumber(it) || it->valuedouble < 0 ||
			    it->valuedouble > 1)
				return "error_rate must be a number from 0 to 1";
			f.error_rate = it->valuedouble;
		} else if (strcmp(k, "delay_ms") == 0) {
			if (!cJSON_IsNumber(it) || it->valuedouble < 0 ||
			    it->valuedouble > 3600000)
				return "delay_ms must be a number from 0 to 3600000";
			f.delay_ms = (long)it->valuedouble;
		} else if (strcmp(k, "hide_new_ms") == 0) {
			if (!cJSON_IsNumber(it) || it->valuedouble < 0 ||
			    it->valuedouble > 3600000)
				return "hide_new_ms must be a number from 0 to 3600000";
			f.hide_new_ms = (long)it->valuedouble;
		} else if (strcmp(k, "body_rate_kbps") == 0) {
			if (!cJSON_IsNumber(it) || it->valuedouble < 0 ||
			    it->valuedouble > 1048576)
				return "body_rate_kbps must be a number from 0 to "
				       "1048576";
			f.body_rate_kbps = (long)it->valuedouble;
		} else if (strcmp(k, "drop_chunked_kb") == 0) {
			if (!cJSON_IsNumber(it) || it->valuedouble < 0 ||
			    it->valuedouble > 1048576)
				return "drop_chunked_kb must be a number from 0 to "
				       "1048576";
			f.drop_chunked_kb = (long)it->valuedouble;
		} else if (strcmp(k, "routes") == 0) {
			const char *e;

			if (!cJSON_IsString(it))
				return "routes must be a string";
			e = routes_parse(&f.routes, it->valuestring);
			if (e)
				return e;
		} else {
			return "unknown fault";
		}
	}
	*out = f;
	return NULL;
}

const char *faults_set(struct faults *f, const char *setting)
{
	char name[64];
	const char *eq = strchr(setting, '=');
	const char *val = eq ? eq + 1 : NULL;
	size_t n = eq ? (size_t)(eq - setting) : strlen(setting);
	char *end;

	if (n >= sizeof(name))
		return "unknown fault";
	memcpy(name, setting, n);
	name[n] = '\0';

	if (strcmp(name, "lose_answer") == 0 || strcmp(name, "drop_before") == 0 ||
	    strcmp(name, "malformed_json") == 0 || strcmp(name, "hostile_listing") == 0 ||
	    strcmp(name, "truncate_answer") == 0 ||
	    strcmp(name, "create_lose_answer") == 0 ||
	    strcmp(name, "refuse_chunked") == 0) {
		bool v = true;

		if (val) {
			if (strcmp(val, "1") == 0 || strcmp(val, "true") == 0)
				v = true;
			else if (strcmp(val, "0") == 0 || strcmp(val, "false") == 0)
				v = false;
			else
				return "a fault switch takes true or false";
		}
		if (name[0] == 'l')
			f->lose_answer = v;
		else if (name[0] == 'd')
			f->drop_before = v;
		else if (name[0] == 'm')
			f->malformed_json = v;
		else if (name[0] == 't')
			f->truncate_answer = v;
		else if (name[0] == 'c')
			f->create_lose_answer = v;
		else if (name[0] == 'r')
			f->refuse_chunked = v;
		else
			f->hostile_listing = v;
		return NULL;
	}
	if (strcmp(name, "error_rate") == 0) {
		double d = val ? strtod(val, &end) : 1.0;

		if ((val && (*end || end == val)) || d < 0 || d > 1)
			return "error_rate must be a number from 0 to 1";
		f->error_rate = d;
		return NULL;
	}
	if (strcmp(name, "delay_ms") == 0) {
		long l = val ? strtol(val, &end, 10) : -1;

		if (!val || *end || end == val || l < 0 || l > 3600000)
			return "delay_ms must be a number of milliseconds";
		f->delay_ms = l;
		return NULL;
	}
	if (strcmp(name, "hide_new_ms") == 0) {
		long l = val ? strtol(val, &end, 10) : -1;

		if (!val || *end || end == val || l < 0 || l > 3600000)
			return "hide_new_ms must be a number of milliseconds";
		f->hide_new_ms = l;
		return NULL;
	}
	if (strcmp(name, "body_rate_kbps") == 0) {
		long l = val ? strtol(val, &end, 10) : -1;

		if (!val || *end || end == val || l < 0 || l > 1048576)
			return "body_rate_kbps must be a number of KiB per second";
		f->body_rate_kbps = l;
		return NULL;
	}
	if (strcmp(name, "drop_chunked_kb") == 0) {
		long l = val ? strtol(val, &end, 10) : -1;

		if (!val || *end || end == val || l < 0 || l > 1048576)
			return "drop_chunked_kb must be a number of KiB";
		f->drop_chunked_kb = l;
		return NULL;
	}
	if (strcmp(name, "routes") == 0) {
		if (!val)
			return "routes needs a value";
		return routes_parse(&f->routes, val);
	}
	return "unknown fault";
}

cJSON *faults_to_json(const struct faults *f)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddBoolToObject(o, "lose_answer", f->lose_answer);
	cJSON_AddBoolToObject(o, "drop_before", f->drop_before);
	cJSON_AddNumberToObject(o, "error_rate", f->error_rate);
	cJSON_AddNumberToObject(o, "delay_ms", (double)f->delay_ms);
	cJSON_AddBoolToObject(o, "malformed_json", f->malformed_json);
	cJSON_AddBoolToObject(o, "hostile_listing", f->hostile_listing);
	cJSON_AddBoolToObject(o, "truncate_answer", f->truncate_answer);
	cJSON_AddNumberToObject(o, "body_rate_kbps", (double)f->body_rate_kbps);
	cJSON_AddBoolToObject(o, "create_lose_answer", f->create_lose_answer);
	cJSON_AddNumberToObject(o, "hide_new_ms", (double)f->hide_new_ms);
	cJSON_AddBoolToObject(o, "refuse_chunked", f->refuse_chunked);
	cJSON_AddNumberToObject(o, "drop_chunked_kb", (double)f->drop_chunked_kb);
	cJSON_AddStringToObject(o, "routes", route_names[f->routes]);
	return o;
}
